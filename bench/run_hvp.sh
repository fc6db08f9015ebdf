#!/bin/sh
# Hessian-vector product cost: ours (hvp_bench) and the libtorch peer (torch_hvp,
# MLP case) with 1 and 2 threads in one go; prints every CSV row, then the tables: our hvp and vhp
# over one gradient (target <= 4) and ours/libtorch for the MLP (< 1: we are faster).
#
# usage: bench/run_hvp.sh [BUILD_BENCH_DIR] [extra args for both programs, e.g. --reps 15]
#   BUILD_BENCH_DIR defaults to build/release/bench. Environment: THREADS="1 2".
set -eu
dir=${1:-build/release/bench}
[ $# -gt 0 ] && shift
threads=${THREADS:-"1 2"}
ours=$dir/hvp_bench
peer=$dir/torch_hvp
[ -x "$ours" ] || { echo "run_hvp: $ours not found (build target hvp_bench)" >&2; exit 1; }
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
echo "case,impl,threads,metric,value"
for t in $threads; do
  "$ours" --threads "$t" "$@" | tee -a "$rows"
  if [ -x "$peer" ]; then "$peer" --threads "$t" "$@" | tee -a "$rows"; fi
done
echo
echo "## second order over one gradient (ours; target hvp <= 4x)"
echo "case,threads,grad_ms,vhp_ms,hvp_ms,vhp/grad,hvp/grad"
awk -F, '$2 == "xgrad" { v[$1 "," $3, $4] = $5; k[$1 "," $3] = 1 }
  END { for (c in k) printf "%s,%.3f,%.3f,%.3f,%.2f,%.2f\n", c, v[c, "grad_ms"], v[c, "vhp_ms"], v[c, "hvp_ms"],
          v[c, "vhp_ms"] / v[c, "grad_ms"], v[c, "hvp_ms"] / v[c, "grad_ms"] }' "$rows" | sort
[ -x "$peer" ] || { echo "# libtorch peer not built: no ratios against it"; exit 0; }
echo
echo "## ours/libtorch time ratio, MLP (< 1 means we are faster)"
echo "case,threads,metric,xgrad_ms,libtorch_ms,ratio"
awk -F, '$4 ~ /_ms$/ { v[$1 "," $3 "," $4, $2] = $5; k[$1 "," $3 "," $4] = 1 }
  END { for (c in k) if (v[c, "libtorch"] > 0)
          printf "%s,%.3f,%.3f,%.3f\n", c, v[c, "xgrad"], v[c, "libtorch"], v[c, "xgrad"] / v[c, "libtorch"] }' "$rows" | sort
