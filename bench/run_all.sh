#!/usr/bin/env bash
# Every comparison against the peers in one command, in the environment a user has (no malloc or
# BLAS tunables are set here; OPENBLAS_CORETYPE is left as the machine sets it), with the ratio
# tables printed at the end and everything written to out/bench/:
#
#   bash bench/run_all.sh            # builds the benchmarks (release preset), then runs them
#   BENCH_DIR=/other/build/release/bench OUT=out/other bash bench/run_all.sh   # runs another build's
#                                    # benchmark programs, unbuilt (bench/ab_run_all.sh does this)
#
# Runs, each at 1 and 2 threads, ours and the peer in the same run: the resampling convolution
# against PyTorch's einsum and sparse bmm, block-sparse linear layers against OpenBLAS dense GEMM
# and PyTorch (masked dense, ModuleList, grouped bmm), the autograd overhead (small graphs and an
# MLP training step), the fashion_cnn training step (conv, batch norm, pooling), GRU/LSTM training
# steps and Hessian-vector products (MLP) against libtorch, and the index ops (index_select,
# index_add, gather, scatter_add, embedding, a GCN aggregation), dropout and the random fills, and the
# sparse ops (spmm, sddmm) against PyTorch, an epoch of minibatch SAGE training with neighbour
# sampling on an R-MAT graph against the same sampler and model in PyTorch, the sparse-training MLP step (static, SET and RigL
# block-sparse against dense and masked dense); and dense GEMM at 1 thread (xgrad's own GEMM, OpenBLAS as loaded and OpenBLAS on
# its Prescott kernels, against the FMA peak). REPS (default 3) sets the repetitions behind each median
# (the short rnn and hvp steps use 3 * REPS, the index, random and sparse ops 5 * REPS, GEMM 2 * REPS + 1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
reps=${REPS:-3}
out=${OUT:-out/bench}
dir=${BENCH_DIR:-build/release/bench}
mkdir -p "$out"
[[ -n ${BENCH_DIR:-} ]] || {
  cmake --preset release -DXGRAD_REQUIRE_ALL=OFF >/dev/null
  cmake --build --preset release --target resample_conv_bench block_sparse_linear_bench autograd_overhead \
    conv_step_bench $(grep -q torch_autograd_overhead build/release/build.ninja && echo torch_autograd_overhead) \
    rnn_step_bench hvp_bench index_ops_bench random_ops_bench sparse_ops_bench graph_layers_bench gemm_bench \
    sparse_training_bench attention_bench graph_minibatch_bench \
    $(grep -q torch_conv_step build/release/build.ninja && echo torch_conv_step torch_rnn_step torch_hvp) \
    $(grep -q ddp_overlap_bench build/release/build.ninja && echo ddp_overlap_bench)
}
start=$(date +%s)
{
  echo "# machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB;" \
    "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; reps per median: $reps"
} | tee "$out/machine.txt"
bash bench/run_resample_conv.sh "$dir" "$reps" "$out/resample_conv.csv" >"$out/resample_conv.txt"
bash bench/run_block_sparse.sh "$dir" "$reps" "$out/block_sparse.csv" >"$out/block_sparse.txt"
ROUNDS=1 bash bench/run_overhead.sh "$dir" --reps "$reps" --iters 5000 --mlp-iters 300 >"$out/overhead.txt"
ROUNDS=1 bash bench/run_conv_step.sh "$dir" --reps "$reps" --iters 10 >"$out/conv_step.txt"
bash bench/run_rnn_step.sh "$dir" --reps $((reps * 3)) >"$out/rnn_step.txt"
bash bench/run_hvp.sh "$dir" --reps $((reps * 3)) >"$out/hvp.txt"
ROUNDS=1 bash bench/run_index_ops.sh "$dir" $((reps * 5)) "$out/index_ops.csv" >"$out/index_ops.txt"
ROUNDS=1 bash bench/run_random_ops.sh "$dir" $((reps * 5)) "$out/random_ops.csv" >"$out/random_ops.txt"
ROUNDS=1 bash bench/run_sparse_ops.sh "$dir" $((reps * 5)) "$out/sparse_ops.csv" >"$out/sparse_ops.txt"
ROUNDS=1 bash bench/run_graph_layers.sh "$dir" $((reps * 5)) "$out/graph_layers.csv" >"$out/graph_layers.txt"
ROUNDS=1 bash bench/run_graph_minibatch.sh "$dir" "$reps" "$out/graph_minibatch.csv" >"$out/graph_minibatch.txt"
bash bench/run_sparse_training.sh "$dir" "$reps" "$out/sparse_training.csv" >"$out/sparse_training.txt"
bash bench/run_attention.sh "$dir" "$reps" >"$out/attention.txt"
# DDP's overlap over a rate-limited link between two network namespaces: needs root, `ip`, `tc` and
# the MPI build; skipped (with a line saying so) otherwise.
if [[ -x "$dir/ddp_overlap" && $(id -u) == 0 ]] && command -v ip >/dev/null && command -v tc >/dev/null; then
  bash bench/run_ddp_netns.sh "$dir" "$reps" >"$out/ddp_netns.txt" 2>&1 || echo "run_all: run_ddp_netns.sh failed (see $out/ddp_netns.txt)"
else
  echo "run_all: skipping bench/run_ddp_netns.sh (needs root, ip, tc and build/release/bench/ddp_overlap)" >"$out/ddp_netns.txt"
fi
bash bench/run_gemm.sh "$dir" $((reps * 2 + 1)) "$out/gemm.csv" >"$out/gemm.txt"
# The tables (the drivers print raw rows first, then tables from their first '## ' line on).
for f in resample_conv block_sparse; do
  echo
  echo "================ $f ================"
  sed -n '/^## /,$p' "$out/$f.txt"
done
echo
echo "================ autograd overhead ================"
sed -n '/^# ours\/libtorch/,$p' "$out/overhead.txt"
echo
echo "================ fashion_cnn training step ================"
sed -n '/^# ours\/libtorch/,$p' "$out/conv_step.txt"
echo
echo "================ GRU/LSTM training step ================"
sed -n '/^# ours\/libtorch/,$p' "$out/rnn_step.txt"
echo
echo "================ Hessian-vector products ================"
sed -n '/^## /,$p' "$out/hvp.txt"
echo
echo "================ sparse training step ================"
sed -n '/^training step/,$p' "$out/sparse_training.txt"
echo
echo "================ attention (fused, against torch bmm-softmax-bmm) ================"
sed -n '/^# ours\/peer/,$p' "$out/attention.txt"
echo
echo "================ index ops ================"
sed -n '/^## /,$p' "$out/index_ops.txt"
echo
echo "================ random ops (dropout) ================"
sed -n '/^## /,$p' "$out/random_ops.txt"
echo
echo "================ sparse ops ================"
sed -n '/^## /,$p' "$out/sparse_ops.txt"
echo
echo "================ graph layers ================"
sed -n '/^## /,$p' "$out/graph_layers.txt"
echo
echo "================ minibatch graph training (R-MAT 2^17) ================"
sed -n '/^## /,$p' "$out/graph_minibatch.txt"
echo
echo "================ dense GEMM (1 thread) ================"
sed -n '/^## /,$p' "$out/gemm.txt"
echo
echo
echo "================ DDP overlap (network namespaces) ================"
grep -E '^(##|ring bound|run_all)' "$out/ddp_netns.txt" || true
echo "run_all: $(($(date +%s) - start)) s; raw rows and tables in $out/"
