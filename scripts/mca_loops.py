#!/usr/bin/env python3
"""The hot inner loops of compiled kernels through llvm-mca, for cores this machine is not.

For every function of OBJECT whose demangled name matches --function, the script disassembles it
(objdump), finds its innermost loops that contain FMAs (a backward jump and the instructions from its
target to it, with no other loop inside), keeps the one with the most FMAs (the kernel's inner loop),
and runs it through llvm-mca for each --mcpu. It prints, per loop and core: the cycles per iteration
(llvm-mca's block reciprocal throughput), the FMAs and loads per iteration, the single-precision
FLOPs per cycle that follow and their share of the core's FMA peak, and the resource llvm-mca's
bottleneck analysis names. The peaks are per core per cycle, float32: Zen 3 and Zen 4 two 256-bit
FMA pipes (a 512-bit FMA takes both), Intel Skylake-SP, Ice Lake-SP and Sapphire Rapids with two
512-bit FMA units (the Xeons of the issue: 32 float32 FMAs per cycle).

  /usr/bin/python3 scripts/mca_loops.py OBJECT --function 'dot_rows_multi<float, xsimd::avx512bw, 2, 4>'
      [--mcpu znver4,skylake-avx512,icelake-server,sapphirerapids] [--mca llvm-mca-16] [--show]

llvm-mca models a loop's steady state with every load hitting L1; what it says is an upper bound for
code whose data streams from L2 or memory. Its znver4 model (LLVM 16) is young: compare it with the
znver3 one (llvm-mca-14 has no znver4) before trusting a Zen 4 figure.
"""
import argparse
import re
import subprocess
import sys

# float32 FMAs per cycle per core (two FMA units of the width below), the peak the shares refer to.
PEAK_FMA_LANES = {
    "znver3": 16, "znver4": 16,
    "skylake-avx512": 32, "icelake-server": 32, "sapphirerapids": 32, "cascadelake": 32,
    "haswell": 16, "skylake": 16,
}
WIDTH = {"xmm": 4, "ymm": 8, "zmm": 16}  # float32 lanes per register

INSN = re.compile(r"^\s*([0-9a-f]+):\s+(.*)$")
HEADER = re.compile(r"^[0-9a-f]+ <(.*)>:$")
JUMP = re.compile(r"^(j[a-z]+)\s+([0-9a-f]+)(\s|$)")


def functions(obj):
    out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", obj], check=True, capture_output=True,
                         text=True).stdout
    name, body = None, []
    for line in out.splitlines():
        h = HEADER.match(line)
        if h:
            if name:
                yield name, body
            name, body = h.group(1), []
            continue
        m = INSN.match(line)
        if m and name:
            body.append((int(m.group(1), 16), re.split(r"\s#", m.group(2))[0].strip()))
    if name:
        yield name, body


def fma_lanes(text, kind="ps"):
    """Multiply-adds of one FMA instruction of the given kind (ps: packed float32, pd: packed float64)."""
    op = text.split()[0] if text else ""
    if not re.match(r"v(f|fn)m(add|sub)[0-9]+" + kind + "$", op):
        return 0
    regs = re.findall(r"%([xyz]mm)\d+", text)
    lanes = WIDTH[regs[-1]] if regs else 4
    return lanes if kind == "ps" else lanes // 2


def loops(body):
    """Innermost loops: (start, end) index pairs of backward jumps with no backward jump inside."""
    index = {addr: i for i, (addr, _) in enumerate(body)}
    found = []
    for i, (_, text) in enumerate(body):
        m = JUMP.match(text)
        if not m:
            continue
        target = int(m.group(2), 16)
        if target in index and index[target] <= i:
            found.append((index[target], i))
    return [(a, b) for a, b in found if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in found)]


def mca_input(body, a, b):
    lines = [".Lloop:"]
    for _, text in body[a:b + 1]:
        m = JUMP.match(text)
        if m:
            lines.append(f"{m.group(1)} .Lloop")
        elif text and not text.startswith(("nop", "cs nop", "data16", "xchg %ax,%ax")):
            lines.append(text)
    return "\n".join(lines) + "\n"


def run_mca(mca, cpu, asm):
    r = subprocess.run([mca, f"-mcpu={cpu}", "-iterations=200", "-bottleneck-analysis"], input=asm,
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[0] if r.stderr else "llvm-mca failed"
    rt = re.search(r"Block RThroughput:\s+([0-9.]+)", r.stdout)
    cycles = re.search(r"Total Cycles:\s+([0-9]+)", r.stdout)
    # The ports (or units) busy in at least half of the pressure cycles, and the register-dependency share.
    block = r.stdout.split("Throughput Bottlenecks:", 1)[1].split("Critical sequence", 1)[0] \
        if "Throughput Bottlenecks:" in r.stdout else ""
    busy = [f"{m.group(1)} {m.group(2)}%" for m in re.finditer(r"-\s+(\S+)\s+\[\s*([0-9.]+)%\s*\]", block)
            if float(m.group(2)) >= 50 and not m.group(1).startswith(("Register", "Memory"))]
    dep = re.search(r"Register Dependencies\s+\[\s*([0-9.]+)%", block)
    what = ", ".join(busy) or "no port above 50%"
    if dep and float(dep.group(1)) >= 20:
        what += f"; register dependencies {dep.group(1)}%"
    if not block:
        what = "no backend pressure"
    per_iter = float(cycles.group(1)) / 200 if cycles else float(rt.group(1))
    return (float(rt.group(1)), per_iter), what


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("object")
    ap.add_argument("--function", required=True, help="regular expression on the demangled name")
    ap.add_argument("--mcpu", default="znver4,skylake-avx512,icelake-server,sapphirerapids")
    ap.add_argument("--mca", default="llvm-mca-16")
    ap.add_argument("--show", action="store_true", help="print each loop's instructions")
    ap.add_argument("--all", action="store_true", help="every innermost FMA loop of each function, not the widest")
    ap.add_argument("--kind", default="ps", choices=["ps", "pd"], help="FMAs counted: float32 (ps) or float64 (pd)")
    args = ap.parse_args()
    pattern = re.compile(args.function)
    any_found = False
    print(f"function | core | cycles/iter | FMAs/iter | loads/iter | {'float32' if args.kind == 'ps' else 'float64'} "
          "FLOP/cycle | share of FMA peak | bottleneck")
    for name, body in functions(args.object):
        if not pattern.search(name):
            continue
        # The loop with the most packed FMA lanes of the kind asked for per instruction: the vector body,
        # not a tail (scalar, float32 widened to float64, or an edge tile of masked loads and stores with
        # more instructions); --all: every such loop.
        cands = [(sum(fma_lanes(t, args.kind) for _, t in body[a:b + 1]), a, b) for a, b in loops(body)]
        cands = [c for c in cands if c[0] > 0]
        if not cands:
            continue
        any_found = True
        best = max(cands, key=lambda c: (c[0] / (c[2] - c[1] + 1), c[0]))
        for lanes, a, b in (sorted(cands, key=lambda c: c[1]) if args.all else [best]):
            report(args, name, body, lanes, a, b)
    if not any_found:
        sys.exit(f"mca_loops: no function matching {args.function!r} with an FMA loop in {args.object}")


def report(args, name, body, lanes, a, b):
    """Prints one loop's row for each core."""
    n_fma = sum(fma_lanes(t, args.kind) > 0 for _, t in body[a:b + 1])
    loads = sum(1 for _, t in body[a:b + 1] if "(" in t and not t.startswith(("lea", "nop")) and
                not re.match(r"^vmov[a-z]*\s+%[xyz]mm\d+,.*\(", t))
    asm = mca_input(body, a, b)
    short = re.sub(r"\(.*$", "", name.replace("xgrad::detail::", "").replace("(anonymous namespace)::", ""))
    short += f" @{body[a][0]:x}" if args.all else ""
    if args.show:
        print(f"# {short}\n{asm}")
    for cpu in args.mcpu.split(","):
        res, what = run_mca(args.mca, cpu, asm)
        if res is None:
            print(f"{short} | {cpu} | - | {n_fma} | {loads} | - | - | {what}")
            continue
        rt, steady = res
        cyc = max(rt, steady)
        flops = 2 * lanes / cyc
        peak = 2 * PEAK_FMA_LANES.get(cpu, 16) // (1 if args.kind == "ps" else 2)
        print(f"{short} | {cpu} | {cyc:.2f} | {n_fma} | {loads} | {flops:.1f} | {100 * flops / peak:.0f}% | {what}")


if __name__ == "__main__":
    main()
