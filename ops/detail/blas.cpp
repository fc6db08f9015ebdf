#include "xgrad/ops/detail/blas.hpp"

#include <cblas.h>

#include <climits>
#include <mutex>
#include <type_traits>

#include "xgrad/core/error.hpp"

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

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "blas::gemm: float or double");
  if (trivial(m, n, k, beta, c, ldc)) return;
  check_sizes(m, n, k, lda, ldb, ldc);
  ensure_single_threaded();
  const auto mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const auto la = static_cast<int>(lda), lb = static_cast<int>(ldb), lc = static_cast<int>(ldc);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), mi, ni, ki, alpha, a, la, b, lb, beta, c, lc);
  else
    cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), mi, ni, ki, alpha, a, la, b, lb, beta, c, lc);
}

template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
                          const float*, std::int64_t, float, float*, std::int64_t);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*, std::int64_t,
                           const double*, std::int64_t, double, double*, std::int64_t);

const char* core_name() { return openblas_get_corename(); }

}  // namespace xgrad::detail::blas
