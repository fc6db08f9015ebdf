#include "xgrad/ops/kernels/blas.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <atomic>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <type_traits>

#include "xgrad/core/error.hpp"
#include "xgrad/ops/kernels/gemm_kernels.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"

namespace xgrad::detail::blas {
namespace {

// Note [OpenBLAS threading]: xgrad's one policy. OpenBLAS runs single-threaded: its own split of one
// GEMM among threads rounds differently with different thread counts (Note [Deterministic GEMM]),
// and inside TBB tasks that already use every allowed thread its pthread pool would oversubscribe
// the cores. xgrad parallelises over fixed blocks instead. openblas_set_num_threads is process-wide;
// it is called here only, before a GEMM, when the count is not 1 already (at the first GEMM, or
// after the application changed it): reading the count costs nothing next to a GEMM, and setting it
// while OpenBLAS runs a GEMM elsewhere is avoided in the common case.
void ensure_single_threaded() {
  if (openblas_get_num_threads() == 1) [[likely]]
    return;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void check_sizes(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda, std::int64_t ldb, std::int64_t ldc) {
  XGRAD_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX,
              "gemm: sizes m={} n={} k={} (lda={} ldb={} ldc={}) exceed the 32-bit BLAS interface", m, n, k, lda, ldb,
              ldc);
}

template <class T>
bool trivial(std::int64_t m, std::int64_t n, std::int64_t k, T beta, T* c, std::int64_t ldc) {
  if (m <= 0 || n <= 0) return true;
  if (k > 0) return false;
  // cblas rejects lda = 0; the product is empty, so C = beta * C
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  return true;
}

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

// set_backend's override: -1 none, else a Backend.
std::atomic<int> g_forced{-1};

Isa isa_of(const char* name) {
  const std::string_view s(name);
  return s == "avx512" ? Isa::avx512
         : s == "avx2" ? Isa::avx2
         : s == "avx"  ? Isa::avx
         : s == "sse3" ? Isa::sse3
                       : Isa::scalar;
}

}  // namespace

// Note [GEMM backend]: OpenBLAS picks its kernels once, when it loads, from the CPU it recognises or
// OPENBLAS_CORETYPE. Debian's OpenBLAS 0.3.21 does not recognise some AVX-512 cloud CPUs and falls back
// to its Prescott (SSE3) kernels: sgemm then reaches a fifth of what the machine can do
// (docs/performance.md, GEMM). xgrad cannot change that choice after load, so blas::gemm has a second
// backend, xgrad's own packed GEMM (gemm_kernels.hpp), which runs the widest kernel family xgrad has for
// the CPU (AVX-512 or the AVX2 baseline, Note [AVX-512 kernels]). XGRAD_GEMM selects: "openblas" and
// "xgrad" force one; "auto" (or unset) takes xgrad's whenever OpenBLAS's core implies an instruction
// set below that of xgrad's kernels, and OpenBLAS otherwise: with its right kernels it is as fast as
// ours on the shapes of bench/gemm.cpp, and faster where k is tiny (32x784x9; docs/performance.md,
// bench/results/gemm.csv). "Below" compares the FMA rate each set reaches: on AMD Zen 4 (family 0x19) a
// 512-bit FMA runs as two 256-bit halves, so OpenBLAS's Haswell (AVX2) kernels reach the AVX-512 peak
// (bench/gemm.cpp's FMA peak is the same at 256 and 512 bits there) and are kept (they match or beat ours
// on the large shapes; bench/results/tuning_notes.md, "GEMM backend"); on Intel's AVX-512 CPUs the
// Haswell kernels reach half the peak and ours are taken. An
// OpenBLAS core name xgrad does not know keeps OpenBLAS. The choice is made once per process (the core cannot change),
// and xgrad::kernel_info() (ops/kernel_info.hpp) reports it with the reason.
CoreIsa core_isa(std::string_view core) {
  std::string c(core);
  for (char& ch : c) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  struct Entry {
    const char* name;
    Isa isa;
  };
  static constexpr Entry kCores[] = {
      {"prescott", Isa::sse3}, {"core2", Isa::sse3},      {"penryn", Isa::sse3},       {"dunnington", Isa::sse3},
      {"nehalem", Isa::sse3},  {"atom", Isa::sse3},       {"sandybridge", Isa::avx},   {"haswell", Isa::avx2},
      {"zen", Isa::avx2},      {"skylakex", Isa::avx512}, {"cooperlake", Isa::avx512}, {"sapphirerapids", Isa::avx512}};
  for (const Entry& e : kCores)
    if (c == e.name) return {e.isa, true};
  return {};
}

const char* backend_name(Backend b) { return b == Backend::xgrad ? "xgrad" : "openblas"; }

bool avx512_half_rate(const CpuInfo& cpu) { return cpu.vendor == "AuthenticAMD" && cpu.family == 0x19; }

Choice choose_backend(const char* env, std::string_view core, Isa own_isa, bool avx512_half_rate) {
  const std::string_view e = env ? env : "";
  if (e == "openblas") return {Backend::openblas, "XGRAD_GEMM=openblas"};
  if (e == "xgrad") return {Backend::xgrad, "XGRAD_GEMM=xgrad"};
  XGRAD_CHECK(e.empty() || e == "auto", "gemm: environment variable XGRAD_GEMM='{}' is not openblas, xgrad or auto", e);
  const CoreIsa ci = core_isa(core);
  if (!ci.known) return {Backend::openblas, fmt::format("auto: OpenBLAS core '{}' not known to xgrad: kept", core)};
  // The FMA rate each set reaches: on a half-rate AVX-512 CPU, AVX2 kernels reach AVX-512's.
  const auto rate = [avx512_half_rate](Isa i) { return avx512_half_rate && i == Isa::avx512 ? Isa::avx2 : i; };
  if (rate(ci.isa) < rate(own_isa))
    return {Backend::xgrad, fmt::format("auto: OpenBLAS runs its {} ({}) kernels, below xgrad's {} kernels", core,
                                        isa_name(ci.isa), isa_name(own_isa))};
  if (ci.isa < own_isa)
    return {Backend::openblas, fmt::format("auto: OpenBLAS runs its {} ({}) kernels, as fast as xgrad's {} here "
                                           "(512-bit FMAs run as two 256-bit halves)",
                                           core, isa_name(ci.isa), isa_name(own_isa))};
  return {Backend::openblas, fmt::format("auto: OpenBLAS runs its {} ({}) kernels, as wide as xgrad's {}", core,
                                         isa_name(ci.isa), isa_name(own_isa))};
}

Isa own_gemm_isa() { return isa_of(gemmk::active().isa); }

namespace {
// This process's choice (Note [GEMM backend]), made at the first call.
const Choice& chosen() {
  static const Choice c =
      choose_backend(std::getenv("XGRAD_GEMM"), core_name(), own_gemm_isa(), avx512_half_rate(cpu_info()));
  return c;
}
}  // namespace

Choice backend() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  if (forced >= 0) return {static_cast<Backend>(forced), "forced by blas::set_backend (test hook)"};
  return chosen();
}

void set_backend(Backend b) { g_forced.store(static_cast<int>(b), std::memory_order_relaxed); }
void reset_backend() { g_forced.store(-1, std::memory_order_relaxed); }

Backend active_backend() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<Backend>(forced);
  return chosen().backend;
}

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "blas::gemm: float or double");
  XGRAD_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm: sizes m={} n={} k={} must not be negative", m, n, k);
  XGRAD_CHECK(m == 0 || n == 0 || ldc >= n, "gemm: argument 'ldc' = {} is less than the {} columns of C", ldc, n);
  if (trivial(m, n, k, beta, c, ldc)) return;
  check_sizes(m, n, k, lda, ldb, ldc);
  // The stored rows of A (m x k, or k x m when trans_a) and B (k x n, or n x k), as cblas requires.
  XGRAD_CHECK(lda >= (trans_a ? m : k), "gemm: argument 'lda' = {} is less than the {} columns of the stored A", lda,
              trans_a ? m : k);
  XGRAD_CHECK(ldb >= (trans_b ? k : n), "gemm: argument 'ldb' = {} is less than the {} columns of the stored B", ldb,
              trans_b ? k : n);
  if (active_backend() == Backend::xgrad) {
    gemmk::gemm<T>({trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc});
    return;
  }
  ensure_single_threaded();
  const auto mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const auto la = static_cast<int>(lda), lb = static_cast<int>(ldb), lc = static_cast<int>(ldc);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), mi, ni, ki, alpha, a, la, b, lb, beta, c, lc);
  else
    cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), mi, ni, ki, alpha, a, la, b, lb, beta, c, lc);
}

XGRAD_INSTANTIATE_FLOATING(gemm);

const char* core_name() { return openblas_get_corename(); }

}  // namespace xgrad::detail::blas
