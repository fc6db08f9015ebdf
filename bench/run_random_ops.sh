#!/usr/bin/env bash
# Runs the random ops benchmark (ours, random_ops_bench) and its PyTorch peer (torch_random_ops.py)
# in one go: for each round and thread count (1, 2) ours then the peer; then the table: per case and
# thread count the median over rounds of each side's medians, and ratio = ours / peer (below 1: we
# are faster).
# usage: run_random_ops.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]     (ROUNDS=3 by default)
set -euo pipefail
dir=${1:?usage: run_random_ops.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]}
reps=${2:-15}
csv=${3:-$(mktemp /tmp/random_ops_bench.XXXXXX.csv)}
rounds=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/peer_rounds.sh"
: >"$csv"
peer_rounds "$csv" "$rounds" "$reps" "$dir/random_ops_bench" "$here/torch_random_ops.py"
echo "raw rows: $csv"
/usr/bin/python3 - "$csv" <<'PY'
import collections, statistics, sys
vals = collections.defaultdict(list)  # (case, impl, threads, metric) -> [values over rounds]
for line in open(sys.argv[1]):
    p = line.strip().split(",")
    if len(p) == 5 and not line.startswith("#"):
        vals[(p[0], p[1], int(p[2]), p[3])].append(float(p[4]))
def med(case, impl, t, m):
    v = vals.get((case, impl, t, m))
    return statistics.median(v) if v else None
f = lambda v: "-" if v is None else "{:.2f}".format(v)
print("\n## Random ops (82,115 x 128 float32): ms (median over rounds of the medians of REPS calls), ratio = xgrad / torch (< 1: faster)")
print("| case | metric | threads | xgrad | torch | ratio |")
print("|---|---|---|---|---|---|")
for c, m in (("dropout", "fwd_ms"), ("dropout", "fwdbwd_ms"), ("rand", "fwd_ms"), ("randn", "fwd_ms")):
    for t in (1, 2):
        x, p = med(c, "xgrad", t, m), med(c, "torch", t, m)
        print(f"| {c} | {m} | {t} | {f(x)} | {f(p)} | {f(x / p if x and p else None)} |")
PY
