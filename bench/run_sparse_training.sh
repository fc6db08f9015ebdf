#!/usr/bin/env bash
# Sparse training (issue 50): the MLP training step of examples/sparse_training, ours (dense, static
# block-sparse, SET, RigL) and PyTorch's (dense, masked dense) in one go, at 1 and 2 threads, then the
# ratio table. usage: run_sparse_training.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]
#   (environment: HIDDEN=2048 DENSITIES="0.1 0.05" UPDATE_EVERY=100)
set -euo pipefail
dir=${1:?usage: run_sparse_training.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]}
reps=${2:-5}
csv=${3:-$(mktemp /tmp/sparse_training_bench.XXXXXX.csv)}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3  # Debian's python with torch (the python3 on PATH may lack it)
hidden=${HIDDEN:-2048}
every=${UPDATE_EVERY:-100}
: >"$csv"
for t in 1 2; do
  for d in ${DENSITIES:-0.1 0.05}; do
    "$dir/sparse_training_bench" --threads "$t" --reps "$reps" --hidden "$hidden" --density "$d" \
      --update-every "$every" | tee -a "$csv"
    # torch.set_num_threads does not reach OpenBLAS, which may run torch's CPU GEMMs.
    OPENBLAS_NUM_THREADS="$t" "$py" "$here/torch_sparse_training.py" "$t" "$reps" "$hidden" "$d" "$every" |
      tee -a "$csv"
  done
done
"$py" - "$csv" <<'PY'
import csv, sys
rows = {}
for c, impl, t, metric, v in csv.reader(open(sys.argv[1])):
    rows[(c, impl, int(t), metric)] = float(v)
print("\ntraining step (median ms per step, structure updates amortised) and parameter + optimizer memory")
print(f"{'case':24} {'thr':>3} {'impl':14} {'ms/step':>9} {'/ our dense':>12} {'/ torch masked':>15} {'MB':>8} {'/ dense':>8}")
for (c, impl, t, metric), v in sorted(rows.items()):
    if metric != "step_ms":
        continue
    dense, masked = rows.get((c, "dense", t, "step_ms")), rows.get((c, "torch_masked", t, "step_ms"))
    mb = rows.get((c, impl, t, "param_opt_bytes"), 0) / 1e6
    dmb = rows.get((c, "dense", t, "param_opt_bytes"), 0) / 1e6
    print(f"{c:24} {t:3d} {impl:14} {v:9.3f} {v / dense:12.3f} {v / masked:15.3f} {mb:8.2f} {mb / dmb:8.3f}")
for key, v in sorted(rows.items()):
    if key[3] == "update_ms":
        print(f"{key[0]:24} {key[2]:3d} {key[1]:14} one structure update: {v:.2f} ms")
PY
