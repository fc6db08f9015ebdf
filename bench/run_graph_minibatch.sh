#!/usr/bin/env bash
# Runs the minibatch graph training benchmark (ours, graph_minibatch_bench) and its PyTorch peer
# (torch_graph_minibatch.py) in one go: for each round and thread count (1, 2) ours then the peer;
# then per thread count the median over rounds of each side's epoch time, sampled edges per second
# and peak RSS, and ratio = ours / peer (epoch time and RSS below 1, edges per second above 1: we are
# ahead). Extra arguments go to both programs (--big: 2^21 nodes and 2^25 edges instead of 2^17;
# --batches B: at most B batches per epoch).
# usage: run_graph_minibatch.sh BENCH_BUILD_DIR [REPS] [OUT_CSV] [--big] [--batches B]   (ROUNDS=3 by default)
set -euo pipefail
dir=${1:?usage: run_graph_minibatch.sh BENCH_BUILD_DIR [REPS] [OUT_CSV] [--big] [--batches B]}
reps=${2:-3}
csv=${3:-$(mktemp /tmp/graph_minibatch_bench.XXXXXX.csv)}
shift $(($# < 3 ? $# : 3))
rounds=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3 # Debian's python with torch (the python3 on PATH may lack it)
: >"$csv"
source "$here/peer_rounds.sh"
peer_rounds "$csv" "$rounds" "$reps" "$dir/graph_minibatch_bench" "$here/torch_graph_minibatch.py" "$@"
echo "raw rows: $csv"
"$py" - "$csv" <<'PY'
import collections, statistics, sys
vals = collections.defaultdict(list)
for line in open(sys.argv[1]):
    p = line.strip().split(",")
    if len(p) == 5 and not line.startswith("#"):
        vals[(p[0], p[1], int(p[2]), p[3])].append(float(p[4]))
med = lambda k: statistics.median(vals[k]) if k in vals else None
cases = sorted({k[0] for k in vals})
print("\n## Minibatch SAGE epoch (sampling + training), median over rounds; ratio = xgrad / torch")
print("| graph | threads | metric | xgrad | torch | ratio |")
print("|---|---|---|---|---|---|")
for c in cases:
    for t in (1, 2):
        for m in ("epoch_ms", "sampled_edges_per_s", "edges_per_batch", "peak_rss_mb", "train_peak_rss_mb"):
            x, p = med((c, "xgrad", t, m)), med((c, "torch", t, m))
            print(f"| {c} | {t} | {m} | {x:.4g} | {p:.4g} | {x / p:.2f} |" if x and p else f"| {c} | {t} | {m} | - | - | - |")
        for m in ("data_mb", "peak_alloc_mb", "train_peak_alloc_mb", "train_peak_cached_mb"):  # ours: memory_stats()
            x = med((c, "xgrad", t, m))
            if x is not None:
                print(f"| {c} | {t} | {m} (memory_stats) | {x:.4g} | - | - |")
PY
