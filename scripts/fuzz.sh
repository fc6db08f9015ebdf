#!/usr/bin/env bash
# Builds the libFuzzer harnesses in fuzz/ with clang-14 + ASan + UBSan (build dir build/fuzz) and
# runs each for a bounded time on its seed corpora: the small committed seeds (fuzz/corpus/<target>/)
# and multi-MB hostile ones generated here by fuzz/make_corpus.py --large (build/fuzz/seeds_large/;
# headers of several MB: many entries, long similar names, huge metadata, duplicates, deep nesting),
# both read only; new inputs go to build/fuzz/corpus/<target>/. Half the time goes to inputs up to
# 64 KB, half to inputs up to 4 MB with the large seeds. Fails if
# any harness finds a crash, a sanitizer report, an uncaught exception, a leak or a timeout (one
# input taking over 20 s: a parser that is not linear in its input); the reproducer is saved as
# build/fuzz/artifacts/<target>-*.
#
#   bash scripts/fuzz.sh             # 60 s per harness
#   bash scripts/fuzz.sh 300         # or XGRAD_FUZZ_SECONDS=300 bash scripts/fuzz.sh
#   XGRAD_FUZZ_TARGETS=fuzz_npy bash scripts/fuzz.sh 30
#   XGRAD_FUZZ_JOBS=2 bash scripts/fuzz.sh   # build with at most 2 jobs (default: ninja's choice)
#   XGRAD_FUZZ_MAX_LEN=65536 bash scripts/fuzz.sh   # largest input in bytes (default 4 MB)
#
# Reproduce a finding: build/fuzz/fuzz_safetensors build/fuzz/artifacts/fuzz_safetensors-crash-...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${1:-${XGRAD_FUZZ_SECONDS:-60}}"
targets=(${XGRAD_FUZZ_TARGETS:-fuzz_safetensors fuzz_safetensors_header fuzz_npy fuzz_deb822 fuzz_sparse_csr})
max_len="${XGRAD_FUZZ_MAX_LEN:-4194304}"
jobs=()
if [[ -n "${XGRAD_FUZZ_JOBS:-}" ]]; then jobs=(-j "$XGRAD_FUZZ_JOBS"); fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "fuzz.sh: the time per harness must be a positive number of seconds, got '$seconds'" >&2
  exit 2
fi

# The library's own dependencies, then the fuzzing toolchain (same pattern as install-deps.sh).
bash scripts/install-deps.sh
missing=()
for p in clang-14 libclang-rt-14-dev; do
  status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
  echo "fuzz.sh: installing ${missing[*]}"
  sudo=()
  if ((EUID != 0)); then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "fuzz.sh: missing packages and not root (run as root or install sudo): ${missing[*]}" >&2
      exit 1
    fi
  fi
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

build=build/fuzz
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 "${launcher[@]}"
cmake --build "$build" --target "${targets[@]}" -- "${jobs[@]}"
# The multi-MB hostile seeds (too big to commit; a few seconds to generate).
rm -rf "$build/seeds_large"
/usr/bin/python3 fuzz/make_corpus.py --large "$build/seeds_large"

export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
mkdir -p "$build/artifacts"
status=0
for t in "${targets[@]}"; do
  name="${t#fuzz_}"
  # fuzz_safetensors_header (the header scanner alone) takes the safetensors seeds and dictionary.
  format="${name%_header}"
  seeds="fuzz/corpus/$format"
  large="$build/seeds_large/$format"
  work="$build/corpus/$name"
  mkdir -p "$work" "$large"  # make_corpus.py has no large seeds for every format
  dict=()
  [[ -f "fuzz/$format.dict" ]] && dict=("-dict=fuzz/$format.dict")
  # Two phases share the budget: first small inputs (up to 64 KB: thousands of runs per second, deep
  # coverage of every header path), then the multi-MB seeds with inputs up to max_len (a few runs
  # per second: size-dependent behaviour, time per byte). With one second in all, only the second.
  small_seconds=$((seconds / 2))
  large_seconds=$((seconds - small_seconds))
  # -timeout: one input taking over 20 s is a hang (a 4 MB header takes 1-5 s with the sanitizers
  # on a loaded 2-core machine; a quadratic parser takes minutes on one of 2 MB even without them);
  # -rss_limit_mb bounds memory.
  common=(-timeout=20 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "${dict[@]}")
  if ((small_seconds > 0)); then
    echo "==> fuzz: $t for ${small_seconds}s, inputs up to 64 KB (seeds: $seeds)"
    if ! "$build/$t" -max_total_time="$small_seconds" -max_len=65536 "${common[@]}" "$work" "$seeds"; then
      echo "==> fuzz: $t FAILED (reproducer in $build/artifacts/)"
      status=1
      continue
    fi
  fi
  echo "==> fuzz: $t for ${large_seconds}s, inputs up to $max_len bytes (seeds: $seeds, $large)"
  if ! "$build/$t" -max_total_time="$large_seconds" -max_len="$max_len" "${common[@]}" "$work" "$seeds" "$large"; then
    echo "==> fuzz: $t FAILED (reproducer in $build/artifacts/)"
    status=1
  fi
done
exit "$status"
