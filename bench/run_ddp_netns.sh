#!/usr/bin/env bash
# Overlap of DDP's gradient averaging with backward across a simulated network (issue 38 item 3):
# two network namespaces joined by a veth pair whose rate `tc qdisc tbf` limits (1 Gbit/s, 10 Gbit/s),
# one rank in each, Open MPI over TCP between them (mpirun starts the remote rank through an rsh
# agent that enters the other namespace). Runs bench/ddp_overlap.cpp at each rate (the batch chosen
# so that backward is at least as long as the all-reduce at that rate), and prints its rows plus the
# ring bound of the all-reduce (2 ranks: every rank sends and receives the gradient bytes once over
# the link: bytes / rate). Needs root (CI runs as root); creates and deletes namespaces xg_ns1,
# xg_ns2 and the 10.77.0.0/24 addresses inside them only.
# usage: run_ddp_netns.sh BENCH_BUILD_DIR [REPS]    (RATES="1gbit:1024 10gbit:128": rate:batch pairs)
set -euo pipefail
dir=${1:?usage: run_ddp_netns.sh BENCH_BUILD_DIR [REPS]}
reps=${2:-5}
rates=${RATES:-"1gbit:1024 10gbit:128"}
bench=$(cd "$dir" && pwd)/ddp_overlap
[[ -x "$bench" ]] || { echo "run_ddp_netns.sh: $bench not built (XGRAD_WITH_MPI)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "run_ddp_netns.sh: needs root (network namespaces)" >&2; exit 1; }
work=$(mktemp -d)
cleanup() {
  ip netns del xg_ns1 2>/dev/null || true
  ip netns del xg_ns2 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cleanup_only_ns() { ip netns del xg_ns1 2>/dev/null || true; ip netns del xg_ns2 2>/dev/null || true; }
cleanup_only_ns
ip netns add xg_ns1
ip netns add xg_ns2
ip link add xg_v1 type veth peer name xg_v2
ip link set xg_v1 netns xg_ns1
ip link set xg_v2 netns xg_ns2
ip -n xg_ns1 addr add 10.77.0.1/24 dev xg_v1
ip -n xg_ns2 addr add 10.77.0.2/24 dev xg_v2
for n in 1 2; do
  ip -n xg_ns$n link set lo up
  ip -n xg_ns$n link set xg_v$n up
done
cat >"$work/agent.sh" <<'AGENT'
#!/bin/sh
# mpirun's rsh agent: "agent.sh HOST COMMAND..." runs COMMAND in HOST's namespace
host="$1"
shift
case "$host" in
  10.77.0.1) ns=xg_ns1 ;;
  10.77.0.2) ns=xg_ns2 ;;
  *) echo "agent.sh: unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" /bin/sh -c "$*"
AGENT
chmod +x "$work/agent.sh"
printf "10.77.0.1 slots=1\n10.77.0.2 slots=1\n" >"$work/hosts"
grad_bytes=$((4 * (784 * 1024 + 1024 + 8 * (1024 * 1024 + 1024) + 1024 * 10 + 10)))
for pair in $rates; do
  rate=${pair%%:*}
  batch=${pair##*:}
  for n in 1 2; do
    ip netns exec xg_ns$n tc qdisc replace dev xg_v$n root tbf rate "$rate" burst 2mb latency 100ms
  done
  echo "## link $rate (tc tbf on both ends), batch $batch per rank, 1 thread per rank"
  ip netns exec xg_ns1 env OMPI_MCA_plm_rsh_agent="$work/agent.sh" OMPI_MCA_btl=self,tcp \
    OMPI_MCA_btl_tcp_if_include=10.77.0.0/24 OMPI_MCA_oob_tcp_if_include=10.77.0.0/24 \
    mpirun --allow-run-as-root --bind-to none --hostfile "$work/hosts" -np 2 "$bench" "$reps" "$batch" | tee "$work/out.csv"
  bits=${rate%gbit}
  /usr/bin/python3 - "$work/out.csv" "$grad_bytes" "$bits" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    p = line.strip().split(",")
    if len(p) == 5 and p[0].startswith("ddp_step"):
        rows[(p[1], p[3])] = float(p[4])
bound = int(sys.argv[2]) * 8 / (float(sys.argv[3]) * 1e9) * 1e3
print(f"ring bound of the all-reduce: {bound:.1f} ms; all-reduce alone at {bound / rows[('allreduce', 'ms')]:.0%} of it; "
      f"hidden {rows[('overlap', 'hidden_fraction')]:.0%}, overlap / max(compute, all-reduce) {rows[('overlap', 'over_max')]:.2f}")
PY
done
