#!/usr/bin/env bash
# Runs the dense GEMM benchmark (gemm_bench, bench/gemm.cpp) at 1 thread: once in the environment as it
# is (xgrad's own GEMM in the kernel family the CPU dispatches to, the same forced to AVX2, and OpenBLAS
# on the core it detected), then once per OpenBLAS core in CORES (default: Prescott, the SSE3 kernels
# OpenBLAS 0.3.21 falls back to on the AVX-512 CPUs it does not recognise) with OPENBLAS_CORETYPE set:
# OpenBLAS reads it when it loads, so each core takes a process of its own. Then the table: GFLOP/s per
# shape and dtype (median of REPS timings) with the fraction of the single-core FMA peak the same binary
# measures, and ours / OpenBLAS-on-CORES[0].
# usage: run_gemm.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]     (CORES="Prescott Haswell" adds cores)
set -euo pipefail
dir=${1:?usage: run_gemm.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]}
reps=${2:-7}
csv=${3:-$(mktemp /tmp/gemm_bench.XXXXXX.csv)}
cores=${CORES:-Prescott}
py=/usr/bin/python3
bench="$dir/gemm_bench"
# The environment's own setting (if any) is what the first run shows; the others set their core.
"$bench" --reps "$reps" | tee "$csv"
for core in $cores; do
  OPENBLAS_CORETYPE=$core "$bench" --reps "$reps" --impl openblas | grep -v ',fma_peak' | tee -a "$csv"
done
echo "raw rows: $csv"
"$py" - "$csv" "$cores" <<'PY'
import collections, sys
rows = collections.OrderedDict()  # (impl label) -> {(dtype, shape): (gflops, of_peak)}
peak = {}
notes = []
first_core = sys.argv[2].split()[0] if sys.argv[2].split() else None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("#"):
        if line not in notes:
            notes.append(line)
        continue
    p = line.split(",")
    if len(p) != 7 or p[0] != "gemm":
        continue
    _, impl, isa, dtype, shape, metric, value = p
    if impl.startswith("fma_peak"):
        peak[(impl, isa, dtype)] = float(value)
        continue
    label = f"{impl} ({isa})"
    d = rows.setdefault(label, {})
    g, f = d.get((dtype, shape), (None, None))
    if metric == "gflops":
        g = float(value)
    elif metric == "of_peak":
        f = float(value)
    d[(dtype, shape)] = (g, f)
print("\n## Dense GEMM, 1 thread: GFLOP/s (fraction of the single-core FMA peak), median of REPS timings")
for n in notes:
    print(n)
for (impl, isa, dtype), v in peak.items():
    print(f"# {impl} {isa} {dtype}: {v:.1f} GFLOP/s")
labels = list(rows)
ours = next((l for l in labels if l.startswith("xgrad (")), None)
slow = next((l for l in labels if first_core and l.startswith(f"openblas ({first_core}/")), None)
keys = []
for l in labels:
    for k in rows[l]:
        if k not in keys:
            keys.append(k)
head = "| dtype | m x n x k | " + " | ".join(labels) + (f" | {ours.split()[0]} / {slow} |" if ours and slow else " |")
print(head)
print("|" + "---|" * (head.count("|") - 1))
for k in keys:
    cells = []
    for l in labels:
        g, f = rows[l].get(k, (None, None))
        cells.append("-" if g is None else f"{g:.1f} ({f:.0%})")
    ratio = ""
    if ours and slow and rows[ours].get(k) and rows[slow].get(k):
        ratio = f" {rows[ours][k][0] / rows[slow][k][0]:.2f}x |"
    print(f"| {k[0]} | {k[1]} | " + " | ".join(cells) + (" |" + ratio if ratio else " |"))
PY
