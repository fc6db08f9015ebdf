#!/usr/bin/env bash
# Runs the resample_conv benchmark (ours) and its PyTorch peer (einsum with a dense T, sparse bmm) in
# one go with 1 and 2 threads, then prints the ratio table against the issue's targets and the
# scaling tables. usage: run_resample_conv.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]
set -euo pipefail
dir=${1:?usage: run_resample_conv.sh BENCH_BUILD_DIR [REPS] [OUT_CSV]}
reps=${2:-7}
csv=${3:-$(mktemp /tmp/resample_conv_bench.XXXXXX.csv)}
here=$(cd "$(dirname "$0")" && pwd)
# Both sides run in the environment a user has: no malloc tunables (xgrad's storage cache keeps its
# buffers, Note [Caching allocator]); the minflt rows count minor page faults per call.
py=/usr/bin/python3  # Debian's python with torch (the python3 on PATH may lack it)
: >"$csv"
for t in 1 2; do
  "$dir/resample_conv_bench" --threads "$t" --reps "$reps" | tee -a "$csv"
  # torch.set_num_threads does not limit OpenBLAS (which runs torch's CPU einsum/bmm here).
  OPENBLAS_NUM_THREADS="$t" "$py" "$here/torch_resample_conv.py" "$t" 5 | tee -a "$csv"
done
echo "raw rows: $csv"
"$py" - "$csv" <<'PY'
import collections, sys
rows = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    p = line.strip().split(",")
    if len(p) == 5:
        rows[(p[0], p[1], int(p[2]))][p[3]] = float(p[4])
def get(c, i, t, m):
    return rows.get((c, i, t), {}).get(m)
def f(v, s="{:.2f}"):
    return "-" if v is None else s.format(v)
def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b
threads = sorted({k[2] for k in rows if k[1] == "xgrad"})
print("\n## Seed workload (N=20, A=500, B=50000, w=0.03, float32): ours vs PyTorch, same run")
print("## (wall ms are medians; cpu ms = process CPU time of that repetition, all threads: with other")
print("##  processes on the machine, wall time includes waiting for a core, CPU time does not)")
print("| threads | ours | metric | ours wall | einsum wall | x einsum (wall) | ours cpu | einsum cpu | x einsum (cpu) | sparse bmm wall | x sparse (wall) | faults/call ours, einsum | target >=150x einsum |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for t in threads:
    for case in ("seed_callable", "seed_sampled", "seed_callable_f64", "seed_callable_tol1e-6", "seed_callable_tol1e-4"):
        for m in ("fwd_ms", "fwdbwd_ms", "fwdbwd_coarse_ms"):
            o = get(case, "xgrad", t, m)
            if o is None:
                continue
            pm = "fwdbwd_ms" if m == "fwdbwd_coarse_ms" else m
            e, s = get("seed_callable", "torch_einsum", t, pm), get("seed_callable", "torch_sparse_bmm", t, pm)
            oc = get(case, "xgrad", t, m.replace("_ms", "_cpu_ms"))
            ec = get("seed_callable", "torch_einsum", t, pm.replace("_ms", "_cpu_ms"))
            re, rs, rc = ratio(e, o), ratio(s, o), ratio(ec, oc)
            fo = get(case, "xgrad", t, m.replace("_ms", "_minflt"))
            fe = get("seed_callable", "torch_einsum", t, pm.replace("_ms", "_minflt"))
            tgt = "" if case not in ("seed_callable", "seed_sampled") or m == "fwdbwd_coarse_ms" else (
                f"wall: {'MET' if re and re >= 150 else 'NOT met'}; cpu: {'MET' if rc and rc >= 150 else 'NOT met'}")
            print(f"| {t} | {case} | {m} | {f(o, '{:.3f}')} | {f(e)} | {f(re, '{:.0f}x')} | {f(oc, '{:.3f}')} | {f(ec)} | {f(rc, '{:.0f}x')} | {f(s)} | {f(rs, '{:.0f}x')} | {f(fo, '{:.1f}')}, {f(fe, '{:.1f}')} | {tgt} |")
    so, se = get("seed_callable", "xgrad", t, "setup_ms"), get("seed_callable", "torch_einsum", t, "setup_ms")
    sd = get("seed_callable", "xgrad", t, "setup_with_derivative_ms")
    r = ratio(se, so)
    soc, sec = get("seed_callable", "xgrad", t, "setup_cpu_ms"), get("seed_callable", "torch_einsum", t, "setup_cpu_ms")
    rc = ratio(sec, soc)
    print(f"| {t} | seed_callable | setup_ms (tables vs building T) | {f(so, '{:.3f}')} | {f(se, '{:.0f}')} | {f(r, '{:.0f}x')} | {f(soc, '{:.3f}')} | {f(sec, '{:.0f}')} | {f(rc, '{:.0f}x')} | | | {'MET' if r and r >= 100 else 'NOT met'} |")
    print(f"| {t} | seed_callable | setup_ms incl. derivative table | {f(sd, '{:.3f}')} | {f(se, '{:.0f}')} | {f(ratio(se, sd), '{:.0f}x')} | | | | | | |")
    # held by the op: its tables (+ a sampled response's cells) and, per forward in flight, the
    # graph's located taps
    gb = get("seed_callable", "xgrad", t, "graph_bytes") or 0
    bo, bt = get("seed_callable", "xgrad", t, "bytes"), get("seed_callable", "torch_einsum", t, "bytes")
    bo = None if bo is None else bo + gb
    bs = get("seed_callable", "torch_sparse_bmm", t, "bytes")
    share = ratio(bo, bt)
    print(f"| {t} | seed_callable | bytes held incl. graph (T for einsum) | {f(bo, '{:.0f}')} | {f(bt, '{:.0f}')} | {f(share, '{:.4%}')} of T | | | | {f(bs, '{:.0f}')} | | {'MET (<1%)' if share is not None and share < 0.01 else 'NOT met'} |")
    bsm = get("seed_sampled", "xgrad", t, "bytes")
    bsm = None if bsm is None else bsm + (get("seed_sampled", "xgrad", t, "graph_bytes") or 0)
    print(f"| {t} | seed_sampled | bytes held incl. graph (T for einsum) | {f(bsm, '{:.0f}')} | {f(bt, '{:.0f}')} | {f(ratio(bsm, bt), '{:.4%}')} of T | | | | | | {'MET (<1%)' if bsm is not None and bt and bsm / bt < 0.01 else 'NOT met'} |")
peak = {t: get("peak", "xgrad", t, "fma_per_s") for t in threads}
print("\n## How cost grows (float32, callable cos^2, N=20): ms and taps/s; taps = N*A*support points")
print("## (ns/tap and Gtaps/s from CPU time: per core-second, immune to waiting; peak = measured FMA/s per core)")
print("| threads | case | B | support pts | A | taps/fwd | fwd ms (wall) | fwd cpu ms | fwd+bwd cpu ms | ns/tap fwd (cpu) | Gtaps per cpu-s | FMA/tap | share of 1-core peak FMA |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for t in threads:
    for prefix in ("scale_B", "scale_S", "scale_A"):
        cases = sorted({k[0] for k in rows if k[0].startswith(prefix) and k[2] == t}, key=lambda c: int(c[len(prefix):]))
        for c in cases:
            v = int(c[len(prefix):])
            B = v if prefix == "scale_B" else 50000
            S = v if prefix == "scale_S" else 1500
            A = v if prefix == "scale_A" else 500
            taps, fw = get(c, "xgrad", t, "taps"), get(c, "xgrad", t, "fwd_ms")
            fc, fbc = get(c, "xgrad", t, "fwd_cpu_ms"), get(c, "xgrad", t, "fwdbwd_cpu_ms")
            tps = taps / (fc * 1e-3)
            fpt = (get(c, "xgrad", t, "degree") or 1) + 1  # polyphase rows: degree+1 FMAs per tap
            pk = peak.get(t) and peak[t] / t
            print(f"| {t} | {c} | {B} | {S} | {A} | {taps:.3g} | {fw:.3f} | {fc:.3f} | {fbc:.3f} | {fc * 1e6 / taps:.3f} | {tps / 1e9:.2f} | {fpt} | "
                  f"{f(ratio(tps * fpt, pk), '{:.1%}')} |")
for t in threads:
    print(f"\npeak FMA rate ({t} thread{'s' if t > 1 else ''}: measured per core x threads, float, AVX-512 where available): {f(peak.get(t) and peak[t] / 1e9, '{:.1f}')} G FMA/s")
PY
