#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: installs what is missing, configures and builds
# the `release` preset (build/release), then runs every test with CTest. Extra arguments go to
# ctest, e.g. `bash scripts/test.sh -R ops_` or `-L install`. The PyTorch extension module xgrad_torch
# (python/) is built and its tests (`-L python`, run with /usr/bin/python3) run with the rest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake --preset release -DXGRAD_REQUIRE_ALL=ON  # every part of the suite, or a configure error
cmake --build --preset release
ctest --preset release --parallel "$(nproc)" "$@"
