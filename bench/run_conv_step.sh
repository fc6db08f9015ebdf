#!/bin/sh
# Runs the fashion_cnn training-step benchmark (conv_step.cpp), ours and the libtorch peer, with 1 and 2 threads in one go,
# prints every CSV row (case,impl,threads,metric,value) and then the ours/peer ratios.
#
# usage: bench/run_conv_step.sh [BUILD_BENCH_DIR] [extra args passed to both programs]
#   BUILD_BENCH_DIR defaults to build/bench; e.g. bench/run_conv_step.sh build/release/bench --reps 9
# Environment: THREADS="1 2" (thread counts to run), ROUNDS=1 (how many times to alternate ours and
# the peer; the ratio uses the median of each side over rounds).
set -eu
dir=${1:-build/bench}
[ $# -gt 0 ] && shift
threads=${THREADS:-"1 2"}
rounds=${ROUNDS:-1}
ours=$dir/conv_step_bench
peer=$dir/torch_conv_step
[ -x "$ours" ] || { echo "run_conv_step: $ours not found (build target conv_step_bench)" >&2; exit 1; }

rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
echo "case,impl,threads,metric,value"
r=1
while [ "$r" -le "$rounds" ]; do
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
  r=$((r + 1))
done

[ -x "$peer" ] || { echo "# libtorch peer not built: no ratios"; exit 0; }
echo
echo "# ours/libtorch time ratio (median over $rounds round(s); < 1 means we are faster)"
echo "# the last two columns: the peer with OPENBLAS_NUM_THREADS equal to its thread count"
echo "case,threads,xgrad_us,libtorch_us,ratio,xgrad_minflt_per_iter,libtorch_minflt_per_iter,libtorch_blas_t_us,ratio_blas_t"
awk -F, '
  $4 == "us" || $4 == "minflt" { key = $1 "," $3; v[key, $2, $4, ++n[key, $2, $4]] = $5; keys[key] = 1 }
  function med(key, impl, metric,   m, i, j, t, a) {
    m = n[key, impl, metric]; if (m == 0) return -1
    for (i = 1; i <= m; i++) a[i] = v[key, impl, metric, i]
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    for (k in keys) {
      o = med(k, "xgrad", "us"); p = med(k, "libtorch", "us"); b = med(k, "libtorch_blas_t", "us")
      if (o > 0 && p > 0)
        printf "%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", k, o, p, o / p, med(k, "xgrad", "minflt"),
               med(k, "libtorch", "minflt"), b, (b > 0 ? o / b : 0)
    }
  }' "$rows" | sort
