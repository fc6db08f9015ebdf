#!/usr/bin/env bash
# Runs the sparse ops benchmark (ours, sparse_ops_bench) and its PyTorch peer (torch_sparse_ops.py) in
# one go: for each round and thread count (1, 2) ours then the peer, so that a burst of load from
# other processes tends to hit both; then the table: per case and thread count the median over rounds
# of each side's medians, the peer being the fastest torch form of the case (COO or CSR for spmm),
# and ratio = ours / peer (below 1: we are faster); for spmm also the fraction of the memory-bandwidth
# bound reached (bound_ms / xgrad ms: sparse_ops.cpp's header says how the bound is counted, from the
# copy bandwidth the same binary measures). BIG=1 adds the 1M-node R-MAT graph (several minutes).
# usage: run_sparse_ops.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]     (ROUNDS=3 by default)
set -euo pipefail
dir=${1:?usage: run_sparse_ops.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]}
reps=${2:-15}
csv=${3:-$(mktemp /tmp/sparse_ops_bench.XXXXXX.csv)}
rounds=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3 # Debian's python with torch (the python3 on PATH may lack it)
ours="$dir/sparse_ops_bench"
big=()
if [[ "${BIG:-0}" == 1 ]]; then big=(--big); fi
: >"$csv"
source "$here/peer_rounds.sh"
peer_rounds "$csv" "$rounds" "$reps" "$ours" "$here/torch_sparse_ops.py" "${big[@]}"
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
def peer(case, t, m):  # the fastest torch form
    best = None
    for (c, impl, tt, mm) in vals:
        if c == case and tt == t and mm == m and impl.startswith("torch"):
            v = med(c, impl, t, m)
            if best is None or v < best[0]:
                best = (v, impl[len("torch_"):])
    return best or (None, "-")
f = lambda v, s="{:.2f}": "-" if v is None else s.format(v)
cases = sorted({k[0] for k in vals if k[1] == "xgrad" and k[0] != "stream" and not k[0].startswith("gather_")},
               key=lambda c: (c.split(":")[1], c.split(":")[0], int(c.split(":")[2][1:])))
print("\n## Sparse ops: ms (median over rounds of the medians of REPS calls), ratio = xgrad / fastest torch form (< 1: faster)")
for t in (1, 2):
    print(f"copy bandwidth at {t} thread(s): {f(med('stream', 'xgrad', t, 'gbps'), '{:.1f}')} GB/s")
    print(f"random 64-byte gathers at {t} thread(s), ns per line per thread by working set: " +
          ", ".join(f"{mb} MB {f(med(f'gather_{mb}MB', 'xgrad', t, 'ns_per_line'), '{:.1f}')}"
                    for mb in (4, 8, 16, 32, 64, 128)))
print("| case | threads | xgrad fwd | torch fwd (form) | ratio fwd | xgrad fwd+bwd | torch fwd+bwd (form) | ratio fwd+bwd | of bw bound fwd, fwd+bwd | gathered GB/s fwd |")
print("|---|---|---|---|---|---|---|---|---|---|")
for c in cases:
    for t in (1, 2):
        xf, (tf, ff) = med(c, "xgrad", t, "fwd_ms"), peer(c, t, "fwd_ms")
        xb, (tb, fb) = med(c, "xgrad", t, "fwdbwd_ms"), peer(c, t, "fwdbwd_ms")
        rf = xf / tf if xf and tf else None
        rb = xb / tb if xb and tb else None
        bf, bb = med(c, "xgrad", t, "bound_fwd_ms"), med(c, "xgrad", t, "bound_fwdbwd_ms")
        eff = "-" if bf is None else f"{bf / xf:.0%}, {bb / xb:.0%}"
        gg = f(med(c, "xgrad", t, "gathered_gbps"), "{:.1f}")
        print(f"| {c} | {t} | {f(xf)} | {f(tf)} ({ff}) | {f(rf)} | {f(xb)} | {f(tb)} ({fb}) | {f(rb)} | {eff} | {gg} |")
PY
