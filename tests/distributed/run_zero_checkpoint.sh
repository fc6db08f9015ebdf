#!/bin/sh
# run_zero_checkpoint.sh PROGRAM COMPARE MPIEXEC [MPIEXEC FLAGS...]: for ZeRO with Adam and with SGD
# (momentum), 8 steps on one process with the plain optimizer (the reference) and, at 1 and 2 ranks,
# uninterrupted or checkpointed after 3 steps and resumed at the other world size, from the shards
# (save_sharded / load_sharded) and from the consolidated state (consolidate_state_dict /
# load_state_dict), and the consolidated state loaded into the plain optimizer; and the 3-step
# checkpoint loaded and saved again at 3 ranks and back at 2. Every run must end with the reference's
# parameters, last loss and optimizer state, bit for bit (zero_checkpoint.cpp).
set -eu
prog="$1"
compare="$2"
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for kind in adam sgd; do
  d="$dir/$kind"
  "$@" -np 1 "$prog" "$kind-plain" 0 3 - "$d/ref3"
  "$@" -np 1 "$prog" "$kind-plain" 0 8 - "$d/ref8"
  "$@" -np 2 "$prog" "$kind" 0 8 - "$d/z2"
  "$@" -np 2 "$prog" "$kind" 0 3 - "$d/a3"
  "$@" -np 1 "$prog" "$kind" 3 8 "sharded:$d/a3" "$d/a8s"
  "$@" -np 1 "$prog" "$kind" 3 8 "full:$d/a3" "$d/a8f"
  "$@" -np 1 "$prog" "$kind" 0 3 - "$d/b3"
  "$@" -np 2 "$prog" "$kind" 3 8 "sharded:$d/b3" "$d/b8s"
  "$@" -np 2 "$prog" "$kind" 3 8 "full:$d/b3" "$d/b8f"
  "$@" -np 1 "$prog" "$kind-plain" 3 8 "full:$d/a3" "$d/p8"
  # the re-partitioning alone (no steps) at 3 ranks, whose shares each take parts of two of the 2-rank
  # shards, and back to 2
  "$@" -np 3 "$prog" "$kind" 3 3 "sharded:$d/a3" "$d/c3s"
  "$@" -np 3 "$prog" "$kind" 3 3 "full:$d/a3" "$d/c3f"
  "$@" -np 2 "$prog" "$kind" 3 3 "sharded:$d/c3s" "$d/c3s2"
  for run in a3 b3 c3s c3f c3s2; do
    echo "$kind $run against the plain optimizer's 3 steps"
    "$compare" "$d/ref3/full.safetensors" "$d/$run/full.safetensors" 0
  done
  for run in z2 a8s a8f b8s b8f p8; do
    echo "$kind $run against the plain optimizer's 8 steps"
    "$compare" "$d/ref8/full.safetensors" "$d/$run/full.safetensors" 0
  done
done
