#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: installs what is missing, builds the examples with the
# `release` preset (build/release) and runs them in order.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Examples to run, in order: folder names under examples/ (each builds to build/release/examples/<name>).
examples=(quickstart)

bash scripts/install-deps.sh
cmake --preset release
targets=()
for name in "${examples[@]}"; do targets+=("example_${name}"); done
cmake --build --preset release --target "${targets[@]}"

for name in "${examples[@]}"; do
  echo "==> examples/${name}"
  "build/release/examples/${name}"
done
