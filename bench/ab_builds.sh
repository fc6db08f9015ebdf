#!/usr/bin/env bash
# Compares one benchmark program of two builds (a refactor's before and after) in one sitting: runs
# BEFORE_DIR/BENCH and AFTER_DIR/BENCH alternately, ROUNDS times each, keeps xgrad's CSV rows
# (case,impl,threads,metric,value) and prints, per row, the median of each build and after/before.
# Both builds must be release builds of the benchmarks (build/release/bench); set nothing else.
# usage: ab_builds.sh BEFORE_DIR AFTER_DIR ROUNDS -- BENCH [ARGS...]
#   e.g. bash bench/ab_builds.sh /tmp/old/build/release/bench build/release/bench 5 -- \
#          block_sparse_linear_bench --threads 1 --reps 3 --case rand_b64_d2
set -euo pipefail
[[ $# -ge 5 && $4 == -- ]] || {
  echo "usage: ab_builds.sh BEFORE_DIR AFTER_DIR ROUNDS -- BENCH [ARGS...]" >&2
  exit 2
}
a=$1 b=$2 rounds=$3
shift 4
bench=$1
shift
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
row='^[^#,]+,[^,]+,[^,]+,[^,]+,[-0-9.e+]+$'
for _ in $(seq 1 "$rounds"); do
  "$a/$bench" "$@" 2>/dev/null | { grep -E "$row" || true; } | sed 's/^/A,/' >>"$rows"
  "$b/$bench" "$@" 2>/dev/null | { grep -E "$row" || true; } | sed 's/^/B,/' >>"$rows"
done
/usr/bin/python3 - "$rows" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(lambda: {'A': [], 'B': []})
for line in open(sys.argv[1]):
    build, case, impl, threads, metric, value = line.strip().split(',')
    if impl.startswith('xgrad'):
        runs[(case, impl, threads, metric)][build].append(float(value))
print('case,impl,threads,metric,before,after,after/before,rounds')
for (case, impl, threads, metric), v in runs.items():
    if v['A'] and v['B'] and statistics.median(v['A']) != 0:
        a, b = statistics.median(v['A']), statistics.median(v['B'])
        print(f'{case},{impl},{threads},{metric},{a:.4g},{b:.4g},{b / a:.3f},{len(v["A"])}')
PY
