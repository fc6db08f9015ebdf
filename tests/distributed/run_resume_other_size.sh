#!/bin/sh
# run_resume_other_size.sh PROGRAM MPIEXEC [MPIEXEC FLAGS...]: 12 steps (two epochs) uninterrupted at
# 1 rank; then 5 steps at 2 ranks resumed at 1 rank, and 5 steps at 1 rank resumed at 2 ranks; each
# resumed run must end at the uninterrupted run's parameters and optimizer state (compare_checkpoints).
set -eu
prog="$1"
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$@" -np 1 "$prog" 0 12 - "$dir/ref.safetensors"
"$@" -np 2 "$prog" 0 5 - "$dir/a5.safetensors"
"$@" -np 1 "$prog" 5 12 "$dir/a5.safetensors" "$dir/a12.safetensors"
"$@" -np 1 "$prog" 0 5 - "$dir/b5.safetensors"
"$@" -np 2 "$prog" 5 12 "$dir/b5.safetensors" "$dir/b12.safetensors"
"$prog.compare" "$dir/ref.safetensors" "$dir/a12.safetensors"
"$prog.compare" "$dir/ref.safetensors" "$dir/b12.safetensors"
