# Sourced by the drivers of the benchmarks with a Python peer (run_index_ops.sh, run_sparse_ops.sh,
# run_graph_layers.sh, run_graph_minibatch.sh).
#
# peer_rounds CSV ROUNDS REPS OURS PEER [ARGS...]: for each of ROUNDS rounds and each thread count
# t in 1, 2, runs `OURS --threads t --reps REPS ARGS...`, then the peer `PEER t REPS ARGS...` under
# Debian's python (the python3 on PATH may lack torch) with OPENBLAS_NUM_THREADS=t, so that a burst
# of load from other processes tends to hit both sides; every row goes to stdout and to CSV. The load
# average is recorded before and after, as comment rows.
peer_python=/usr/bin/python3

peer_rounds() {
  local csv=$1 rounds=$2 reps=$3 ours=$4 peer=$5
  shift 5
  local r t
  echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$csv"
  for r in $(seq "$rounds"); do
    for t in 1 2; do
      "$ours" --threads "$t" --reps "$reps" "$@" | tee -a "$csv"
      OPENBLAS_NUM_THREADS="$t" "$peer_python" "$peer" "$t" "$reps" "$@" | tee -a "$csv"
    done
  done
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$csv"
}
