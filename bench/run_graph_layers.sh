#!/usr/bin/env bash
# Runs the graph layer benchmark (ours, graph_layers_bench) and its PyTorch peer written as PyG
# computes (torch_graph_layers.py) in one go: for each round and thread count (1, 2) ours then the
# peer; then per layer and thread count the median over rounds of each side's medians and
# ratio = ours / peer (below 1: we are faster).
# usage: run_graph_layers.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]     (ROUNDS=3 by default)
set -euo pipefail
dir=${1:?usage: run_graph_layers.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]}
reps=${2:-15}
csv=${3:-$(mktemp /tmp/graph_layers_bench.XXXXXX.csv)}
rounds=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3 # Debian's python with torch (the python3 on PATH may lack it)
: >"$csv"
source "$here/peer_rounds.sh"
peer_rounds "$csv" "$rounds" "$reps" "$dir/graph_layers_bench" "$here/torch_graph_layers.py"
echo "raw rows: $csv"
"$py" - "$csv" <<'PY'
import collections, statistics, sys
vals = collections.defaultdict(list)
for line in open(sys.argv[1]):
    p = line.strip().split(",")
    if len(p) == 5 and not line.startswith("#"):
        vals[(p[0], p[1], int(p[2]))].append(float(p[4]))
med = lambda k: statistics.median(vals[k]) if k in vals else None
def peer(c, t):  # the fastest torch form
    forms = [(med(k), k[1][len("torch_"):]) for k in vals if k[0] == c and k[2] == t and k[1].startswith("torch")]
    return min(forms) if forms else (None, "-")
print("\n## Graph layer steps (forward + backward): ms, median over rounds; ratio = xgrad / fastest PyG-style torch form (< 1: faster)")
print("| layer | threads | xgrad | torch (form) | ratio |")
print("|---|---|---|---|---|")
for c in ("sage", "gcn", "gat"):
    for t in (1, 2):
        x, (p, form) = med((c, "xgrad", t)), peer(c, t)
        print(f"| {c} | {t} | {x:.2f} | {p:.2f} ({form}) | {x / p:.2f} |" if x and p else f"| {c} | {t} | - | - | - |")
PY
