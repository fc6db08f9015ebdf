#!/usr/bin/env bash
# Runs the index ops benchmark (ours, index_ops_bench) and its PyTorch peer (torch_index_ops.py) in
# one go: for each round and thread count (1, 2) ours then the peer, so that a burst of load from
# other processes tends to hit both; then the peak memory of one forward+backward per case, each in
# a fresh process (2 threads); then the tables: per case and thread count the median over rounds of
# each side's medians, and ratio = ours / peer (below 1: we are faster).
# usage: run_index_ops.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]     (ROUNDS=3 by default)
set -euo pipefail
dir=${1:?usage: run_index_ops.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]}
reps=${2:-15}
csv=${3:-$(mktemp /tmp/index_ops_bench.XXXXXX.csv)}
rounds=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3 # Debian's python with torch (the python3 on PATH may lack it)
ours="$dir/index_ops_bench"
source "$here/peer_rounds.sh"
: >"$csv"
# torch runs its CPU GEMMs through OpenBLAS here; none in these cases, but peer_rounds keeps it to t threads.
peer_rounds "$csv" "$rounds" "$reps" "$ours" "$here/torch_index_ops.py"
for c in gcn_aggregate index_select index_add gather scatter_add embedding; do
  "$ours" --threads 2 --peak "$c" | tee -a "$csv"
  OPENBLAS_NUM_THREADS=2 "$py" "$here/torch_index_ops.py" 2 --peak "$c" | tee -a "$csv"
done
echo "raw rows: $csv"
"$py" - "$csv" <<'PY'
import collections, statistics, sys
vals = collections.defaultdict(list)  # (case, impl, threads, metric) -> [values over rounds]
for line in open(sys.argv[1]):
    p = line.strip().split(",")
    if len(p) == 5 and not line.startswith("#"):
        vals[(p[0], p[1], int(p[2]), p[3])].append(float(p[4]))
def med(case, impl, t, m):
    v = vals.get((case, impl, t, m))
    return statistics.median(v) if v else None
cases = ["gcn_aggregate", "index_select", "index_add", "gather", "scatter_add", "embedding"]
f = lambda v, s="{:.2f}": "-" if v is None else s.format(v)
print("\n## Index ops: ms (median over rounds of the medians of REPS calls), ratio = xgrad / torch (< 1: faster)")
print("| case | threads | xgrad fwd | torch fwd | ratio fwd | xgrad fwd+bwd | torch fwd+bwd | ratio fwd+bwd |")
print("|---|---|---|---|---|---|---|---|")
for c in cases:
    for t in (1, 2):
        xf, tf = med(c, "xgrad", t, "fwd_ms"), med(c, "torch", t, "fwd_ms")
        xb, tb = med(c, "xgrad", t, "fwdbwd_ms"), med(c, "torch", t, "fwdbwd_ms")
        rf = xf / tf if xf and tf else None
        rb = xb / tb if xb and tb else None
        print(f"| {c} | {t} | {f(xf)} | {f(tf)} | {f(rf)} | {f(xb)} | {f(tb)} | {f(rb)} |")
print("\n## Peak memory of one forward+backward (2 threads, fresh process): MB")
print("| case | xgrad peak RSS | torch peak RSS | xgrad growth | torch growth |")
print("|---|---|---|---|---|")
mb = lambda v: None if v is None else v / 2**20
for c in cases:
    print(f"| {c} | {f(mb(med(c, 'xgrad', 2, 'peak_rss_bytes')), '{:.1f}')} | {f(mb(med(c, 'torch', 2, 'peak_rss_bytes')), '{:.1f}')} | "
          f"{f(mb(med(c, 'xgrad', 2, 'peak_growth_bytes')), '{:.1f}')} | {f(mb(med(c, 'torch', 2, 'peak_growth_bytes')), '{:.1f}')} |")
PY
