#!/bin/sh
# Fused attention (issue 51) against PyTorch 1.13's bmm-softmax-bmm attention: q, k, v (8 heads, L, 64),
# float32, forward + backward. Timing: L in $LENGTHS (default 1024 2048 4096 8192) at 1 and 2 threads, ours
# and the peer alternated per thread count, and our block-sparse attention (window + global blocks of
# 64) against our dense fused. Memory: one process per L in $MEM_LENGTHS (default 1024 ...
# 16384), each reporting its peak resident set (VmHWM); the peer prints `oom` where it cannot allocate.
# Prints every CSV row, then the ours/peer time ratios and the peak memory per L.
#
# usage: bench/run_attention.sh [BUILD_BENCH_DIR] [REPS]    (environment: THREADS, LENGTHS, MEM_LENGTHS)
set -eu
dir=${1:-build/release/bench}
reps=${2:-5}
threads=${THREADS:-"1 2"}
lengths=${LENGTHS:-"1024 2048 4096 8192"}
mem_lengths=${MEM_LENGTHS:-"1024 2048 4096 8192 16384"}
ours=$dir/attention_bench
peer="/usr/bin/python3 $(dirname "$0")/torch_attention.py"
[ -x "$ours" ] || { echo "run_attention: $ours not found (build target attention_bench)" >&2; exit 1; }
rows=$(mktemp)
trap 'rm -f "$rows" "$rows.peer"' EXIT
echo "case,impl,threads,metric,value"
for t in $threads; do
  args=""
  for l in $lengths; do args="$args --length $l"; done
  "$ours" --threads "$t" --reps "$reps" $args | grep -v ',peak_mb,' | tee -a "$rows"
  # shellcheck disable=SC2086
  $peer "$t" "$reps" 8 $lengths | grep -v ',peak_mb,' | tee -a "$rows"
done
for l in $mem_lengths; do
  "$ours" --threads 1 --reps 1 --length "$l" | grep -E ',(peak_mb|alloc_peak_mb),' | tee -a "$rows"
  # A peer killed by the kernel's out-of-memory killer prints nothing: count that as running out.
  # shellcheck disable=SC2086
  if ! $peer 1 1 8 "$l" >"$rows.peer" 2>&1; then echo "L${l}_h8_e64,torch_bmm,1,oom,killed" >>"$rows.peer"; fi
  grep -E ',(peak_mb|oom),' "$rows.peer" | tee -a "$rows" || true
done
echo
echo "# ours/peer time ratio (< 1: we are faster)"
echo "case,threads,metric,xgrad_ms,torch_ms,ratio"
awk -F, '$4 ~ /_ms$/ { v[$1 "," $3 "," $4, $2] = $5; keys[$1 "," $3 "," $4] = 1 }
  END { for (k in keys) if (v[k, "xgrad"] > 0 && v[k, "torch_bmm"] > 0)
          printf "%s,%.3f,%.3f,%.3f\n", k, v[k, "xgrad"], v[k, "torch_bmm"], v[k, "xgrad"] / v[k, "torch_bmm"] }' "$rows" | sort
echo
echo "# block-sparse (window 3 + global 1 blocks of 64) against our dense fused attention, forward + backward"
echo "case,threads,dense_ms,block_sparse_ms,speedup,density"
awk -F, '$4 == "fwdbwd_ms" && $2 == "xgrad" { d[$1 "," $3] = $5 }
  $2 == "xgrad_block_sparse" && $4 == "fwdbwd_ms" { c = $1; sub(/_window3_global1_b64$/, "", c); b[c "," $3] = $5 }
  $2 == "xgrad_block_sparse" && $4 == "density" { c = $1; sub(/_window3_global1_b64$/, "", c); den[c "," $3] = $5 }
  END { for (k in b) if (d[k] > 0) printf "%s,%.3f,%.3f,%.2f,%s\n", k, d[k], b[k], d[k] / b[k], den[k] }' "$rows" | sort
echo
echo "# peak resident set per L (MB; one process per L, 1 thread)"
echo "case,xgrad_peak_mb,torch_peak_mb"
awk -F, '$4 == "peak_mb" { v[$1, $2] = $5; keys[$1] = 1 } $4 ~ /^oom/ { v[$1, $2] = "oom"; keys[$1] = 1 }
  END { for (k in keys) printf "%s,%s,%s\n", k, v[k, "xgrad"], v[k, "torch_bmm"] }' "$rows" | sort -t L -k2 -n
