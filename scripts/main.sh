#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: installs what is missing, builds the examples with the
# `release` preset (build/release) and runs them in order.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Examples to run, in order: folder names under examples/ (each builds to build/release/examples/<name>).
examples=(spectral_fit block_sparse_mlp fashion_cnn sparse_training char_model package_graph)
# Extra arguments per example: the short forms of fashion_cnn (~300 steps on a subset), char_model
# (~10 s) and package_graph (~5 s); their full runs are `build/release/examples/<name>` without
# arguments (README.md, Examples).
declare -A example_args=([fashion_cnn]="--quick" [sparse_training]="--quick" [char_model]="--quick" [package_graph]="--quick")

# The test-only packages (PyTorch, Catch2, MPI) are not needed here; install-deps.sh also fills apt's
# package index when it is empty (examples/package_graph reads it).
bash scripts/install-deps.sh --main
# The library and the examples only (no search for the test, MPI or PyTorch packages); not kept in the
# cache: scripts/test.sh, run next in the same folder, builds the rest and reuses every object built here.
cmake --preset release -DXGRAD_REQUIRE_ALL=OFF -DXGRAD_EXAMPLES_ONLY=ON
targets=()
for name in "${examples[@]}"; do targets+=("example_${name}"); done
# One compile per core: ninja's default (cores + 2) runs four heavy -O3 compiles on two cores; in a
# back-to-back comparison on the 2-core project VM that build took 2:43 against 2:14 with -j2.
cmake --build --preset release --target "${targets[@]}" --parallel "$(nproc)"

for name in "${examples[@]}"; do
  echo "==> examples/${name} (plots and CSVs go to out/${name}/)"
  # shellcheck disable=SC2086  # the extra arguments are words
  "build/release/examples/${name}" --out "out/${name}" ${example_args[$name]:-}
done
echo "==> done: plots in $(pwd)/out/spectral_fit/*.png, $(pwd)/out/block_sparse_mlp/*.png, $(pwd)/out/fashion_cnn/*.png, $(pwd)/out/sparse_training/*.png and $(pwd)/out/package_graph/*.png; samples in out/char_model/"
