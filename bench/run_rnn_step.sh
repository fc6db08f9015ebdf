#!/bin/sh
# Runs the recurrent training-step benchmark, ours (rnn_step_bench) and the libtorch peer
# (torch_rnn_step), with 1 and 2 threads in one go, prints every CSV row (case,impl,threads,metric,value)
# and then the ours/libtorch ratios (< 1: we are faster).
#
# usage: bench/run_rnn_step.sh [BUILD_BENCH_DIR] [extra args passed to both programs, e.g. --reps 9]
#   BUILD_BENCH_DIR defaults to build/release/bench. Environment: THREADS="1 2".
set -eu
dir=${1:-build/release/bench}
[ $# -gt 0 ] && shift
threads=${THREADS:-"1 2"}
ours=$dir/rnn_step_bench
peer=$dir/torch_rnn_step
[ -x "$ours" ] || { echo "run_rnn_step: $ours not found (build target rnn_step_bench)" >&2; exit 1; }

rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
echo "case,impl,threads,metric,value"
for t in $threads; do
  # Alternate ours and the peer so that a burst of load from other processes hits both.
  "$ours" --threads "$t" "$@" | tee -a "$rows"
  if [ -x "$peer" ]; then
    "$peer" --threads "$t" "$@" | tee -a "$rows"
    # A separately labelled row: torch::set_num_threads does not reach Debian's OpenBLAS, which runs
    # libtorch's GEMMs on every core by default; with OPENBLAS_NUM_THREADS=t the peer really uses t.
    OPENBLAS_NUM_THREADS=$t "$peer" --threads "$t" "$@" | sed 's/,libtorch,/,libtorch_blas_t,/' | tee -a "$rows"
  fi
done

[ -x "$peer" ] || { echo "# libtorch peer not built: no ratios"; exit 0; }
echo
echo "# ours/libtorch time ratio (< 1 means we are faster); the last two columns: the peer with"
echo "# OPENBLAS_NUM_THREADS equal to its thread count (its GEMMs then use that many cores)"
echo "case,threads,xgrad_ms,libtorch_ms,ratio,libtorch_blas_t_ms,ratio_blas_t"
awk -F, '$4 == "ms" { v[$1 "," $3, $2] = $5; keys[$1 "," $3] = 1 }
  END { for (k in keys) if (v[k, "xgrad"] > 0 && v[k, "libtorch"] > 0) {
          b = v[k, "libtorch_blas_t"]
          printf "%s,%.4f,%.4f,%.3f,%.4f,%.3f\n", k, v[k, "xgrad"], v[k, "libtorch"], v[k, "xgrad"] / v[k, "libtorch"],
                 b, (b > 0 ? v[k, "xgrad"] / b : 0) } }' "$rows" | sort
