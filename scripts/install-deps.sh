#!/usr/bin/env bash
# Installs everything xgrad needs to build, test and benchmark (or with --main only what the main
# job needs), from Debian 12 packages only.
# Idempotent and fast when there is nothing to do: packages are checked with dpkg-query first and
# apt-get (update + install) runs only for the missing ones, or when apt's package index is empty
# (examples/package_graph's data). Needs root (or sudo) when it installs.
set -euo pipefail

# What the main job (scripts/main.sh: build and run the examples) needs, including the data package
# of every nn::datasets loader its examples use (each loader names it: kPackage; the test "the main
# job installs ..." in tests/nn/test_datasets.cpp fails when one is missing here) ...
main_packages=(
  cmake ninja-build g++                  # toolchain (CMake 3.25, g++ 12)
  libxtensor-dev libxsimd-dev xtl-dev    # xtensor at the API boundary, SIMD
  libtbb-dev                             # parallel kernels
  libopenblas-dev                        # dense GEMM through CBLAS
  libfmt-dev                             # error messages and printing
  nlohmann-json3-dev                     # checkpoints (safetensors headers)
  zlib1g-dev                             # gzip-compressed datasets (nn/datasets, IDX files)
  libcli11-dev                           # command lines of examples and benchmarks
  gnuplot-nox                            # the examples' PNG plots
  dataset-fashion-mnist                  # examples/fashion_cnn's data (nn::datasets::FashionMNIST)
  wamerican                              # examples/char_model's word list (nn::datasets::WordList)
)
# ... and what the tests and benchmarks need on top (PyTorch alone is several hundred MB).
test_packages=(
  catch2                                 # tests (Catch2 v2)
  libopenmpi-dev openmpi-bin             # optional MPI data parallelism (xgrad::distributed) and its tests
  python3-torch python3-numpy            # PyTorch parity tests and the benchmark peer
  libtorch-dev                           # C++ PyTorch peer in bench/ (optional for the build)
  python3-dev pybind11-dev               # the PyTorch extension module xgrad_torch (python/, optional)
  python3-venv python3-setuptools python3-wheel  # pip install --no-build-isolation ./python in a venv
                                         # (docs/python.md; the test python_pip_install), offline
)
# usage: install-deps.sh [--main]   (--main: only what building and running the examples needs)
packages=("${main_packages[@]}")
if [[ "${1:-}" != "--main" ]]; then packages+=("${test_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

# examples/package_graph's data is apt's package index itself (apt-cache dumpavail), which a fresh
# container lacks (/var/lib/apt/lists is empty): apt-get update fills it.
index_empty=false
if [[ -z "$(apt-cache dumpavail 2>/dev/null | head -c 1)" ]]; then index_empty=true; fi

if ((${#missing[@]} == 0)) && ! $index_empty; then
  echo "install-deps: all ${#packages[@]} packages already installed; apt's package index is present"
  exit 0
fi

if ((${#missing[@]} > 0)); then echo "install-deps: installing ${missing[*]}"; fi
if $index_empty; then echo "install-deps: apt's package index is empty (examples/package_graph reads it): apt-get update"; fi
sudo=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: not root (run as root or install sudo); needed: apt-get update${missing[*]:+ and ${missing[*]}}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
if ((${#missing[@]} > 0)); then
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
