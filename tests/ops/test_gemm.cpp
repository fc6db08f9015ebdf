// Tests for xgrad's own GEMM (ops/kernels/gemm_kernels.hpp) and blas::gemm's backend choice
// (Note [GEMM backend] in ops/kernels/blas.cpp): against a double-accumulated triple loop for every
// transpose, odd and empty sizes, padded leading dimensions and alpha / beta (beta = 0 over NaN); both
// kernel families; thread determinism of matmul on the own backend; XGRAD_GEMM; kernel_info.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support.hpp"
#include "xgrad/core/cpu_info.hpp"
#include "xgrad/core/detail/cpu.hpp"
#include "xgrad/ops/kernel_info.hpp"
#include "xgrad/ops/kernels/blas.hpp"
#include "xgrad/ops/kernels/gemm_kernels.hpp"
#include "xgrad/ops/matmul.hpp"

using namespace xgrad;
namespace blas = xgrad::detail::blas;

namespace {

// Runs fn with blas::gemm on backend b, restoring the process's choice after.
template <class F>
void with_backend(blas::Backend b, F&& fn) {
  blas::set_backend(b);
  try {
    fn();
  } catch (...) {
    blas::reset_backend();
    throw;
  }
  blas::reset_backend();
}

// Kernel families to test: the baseline, and AVX-512 when the CPU runs it.
std::vector<bool> families() {
  std::vector<bool> f = {false};
  if (detail::avx512_enabled()) f.push_back(true);
  return f;
}

// C = alpha op(A) op(B) + beta C through blas::gemm against a double-accumulated triple loop, with
// leading dimensions padded by pad (so a kernel that ignores them reads or writes the wrong elements;
// the padding of C must stay untouched). Tolerance: (k + 2) roundings of the sum of magnitudes.
template <class T>
void check_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T beta, std::int64_t pad,
                std::mt19937& gen, bool nan_c = false) {
  INFO("trans_a " << ta << " trans_b " << tb << " m " << m << " n " << n << " k " << k << " alpha " << alpha << " beta "
                  << beta << " pad " << pad);
  std::uniform_real_distribution<double> u(-1, 1);
  const std::int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  const std::int64_t lda = ac + pad, ldb = bc + pad, ldc = n + pad;
  std::vector<T> a(static_cast<std::size_t>(ar * lda + 1)), b(static_cast<std::size_t>(br * ldb + 1)),
      c(static_cast<std::size_t>(m * ldc + 1));
  for (T& x : a) x = static_cast<T>(u(gen));
  for (T& x : b) x = static_cast<T>(u(gen));
  for (T& x : c) x = nan_c ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(u(gen));
  const std::vector<T> c0 = c;
  blas::gemm<T>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  const auto at = [&](std::int64_t i, std::int64_t p) {
    return static_cast<double>(ta ? a[static_cast<std::size_t>(p * lda + i)]
                                  : a[static_cast<std::size_t>(i * lda + p)]);
  };
  const auto bt = [&](std::int64_t p, std::int64_t j) {
    return static_cast<double>(tb ? b[static_cast<std::size_t>(j * ldb + p)]
                                  : b[static_cast<std::size_t>(p * ldb + j)]);
  };
  const double eps = std::numeric_limits<T>::epsilon();
  int bad = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < ldc; ++j) {
      const auto idx = static_cast<std::size_t>(i * ldc + j);
      if (j >= n) {  // padding: untouched (compared as bits: it may be NaN)
        if (std::memcmp(&c[idx], &c0[idx], sizeof(T)) != 0) ++bad;
        continue;
      }
      double s = 0, mag = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        s += at(i, p) * bt(p, j);
        mag += std::abs(at(i, p) * bt(p, j));
      }
      const double old = beta == T(0) ? 0.0 : static_cast<double>(c0[idx]);
      const double want = static_cast<double>(alpha) * s + static_cast<double>(beta) * old;
      const double tol = static_cast<double>(k + 2) * eps *
                             (std::abs(static_cast<double>(alpha)) * mag + std::abs(static_cast<double>(beta) * old)) +
                         1e-30;
      const double got = static_cast<double>(c[idx]);
      if (!(std::abs(got - want) <= tol)) {
        if (bad < 3) FAIL_CHECK("C[" << i << "][" << j << "] = " << got << ", want " << want << " (tol " << tol << ")");
        ++bad;
      }
    }
  CHECK(bad == 0);
  // nothing past C's last row is written (compared as bits: it may be NaN)
  CHECK(std::memcmp(&c[c.size() - 1], &c0[c0.size() - 1], sizeof(T)) == 0);
}

}  // namespace

TEST_CASE("gemm: own GEMM matches a double-accumulated loop for every transpose and odd sizes", "[gemm]") {
  std::mt19937 gen(37);
  const std::vector<std::int64_t> sizes = {0, 1, 2, 3, 7, 17, 33, 65, 129};
  // 530: more than one panel of inner indices in either family (kc = 256 for AVX2, 512 for AVX-512)
  const std::vector<std::int64_t> ks = {0, 1, 3, 17, 129, 530};
  with_backend(blas::Backend::xgrad, [&] {
    for (bool wide : families()) {
      detail::set_avx512_enabled(wide);
      INFO("avx512 family " << wide);
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (std::int64_t m : sizes)
            for (std::int64_t n : sizes)
              for (std::int64_t k : ks) {
                if ((m * 7 + n * 3 + k) % 3 != 0 && m > 3 && n > 3) continue;  // a third of the larger mixes
                check_gemm<float>(ta, tb, m, n, k, 1.0f, 0.0f, 0, gen);
                check_gemm<double>(ta, tb, m, n, k, 1.0, 0.0, 0, gen);
              }
      detail::set_avx512_enabled(true);
    }
  });
}

TEST_CASE("gemm: own GEMM honours leading dimensions, alpha and beta (beta = 0 over NaN)", "[gemm]") {
  std::mt19937 gen(38);
  with_backend(blas::Backend::xgrad, [&] {
    for (bool wide : families()) {
      detail::set_avx512_enabled(wide);
      INFO("avx512 family " << wide);
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          for (double alpha : {1.0, -0.5, 2.0})
            for (double beta : {0.0, 1.0, 0.25, -3.0}) {
              check_gemm<float>(ta, tb, 37, 45, 530, static_cast<float>(alpha), static_cast<float>(beta), 5, gen);
              check_gemm<double>(ta, tb, 13, 70, 19, alpha, beta, 3, gen);
            }
          // beta = 0 never reads C: NaN there does not reach the result (also with k = 0).
          check_gemm<float>(ta, tb, 20, 33, 9, 1.5f, 0.0f, 2, gen, true);
          check_gemm<double>(ta, tb, 20, 33, 0, 1.5, 0.0, 2, gen, true);
          // Blocks beyond one: rows past mc, columns past nc.
          check_gemm<float>(ta, tb, 200, 1100, 40, 1.0f, 0.5f, 1, gen);
        }
      // alpha = 0: C = beta C, A and B not read (NaN in them does not reach C).
      std::vector<float> a(12, std::numeric_limits<float>::quiet_NaN()), c = {1, 2, 3, 4};
      blas::gemm<float>(false, false, 2, 2, 6, 0.0f, a.data(), 6, a.data(), 2, 2.0f, c.data(), 2);
      CHECK((c[0] == 2 && c[1] == 4 && c[2] == 6 && c[3] == 8));
      blas::gemm<float>(false, false, 2, 2, 6, 0.0f, a.data(), 6, a.data(), 2, 0.0f, c.data(), 2);
      CHECK((c[0] == 0 && c[3] == 0));
      detail::set_avx512_enabled(true);
    }
  });
}

TEST_CASE("gemm: both backends agree and bad sizes are an error on either", "[gemm]") {
  std::mt19937 gen(39);
  for (blas::Backend b : {blas::Backend::openblas, blas::Backend::xgrad})
    with_backend(b, [&] {
      INFO("backend " << blas::backend_name(b));
      check_gemm<float>(true, false, 65, 33, 129, 1.0f, 1.0f, 2, gen);
      check_gemm<double>(false, true, 33, 65, 17, -1.0, 0.0, 0, gen);
      xgrad::test::require_error(
          [] {
            float z = 0;
            blas::gemm<float>(false, false, 1, 1, std::int64_t{1} << 32, 1.f, &z, std::int64_t{1} << 32, &z, 1, 0.f, &z,
                              1);
          },
          {"gemm", "k=4294967296"});
      std::vector<double> buf(64, 0.0);
      xgrad::test::require_error(
          [&] { blas::gemm<double>(false, false, 2, -1, 3, 1.0, buf.data(), 3, buf.data(), 3, 0.0, buf.data(), 3); },
          {"gemm", "n=-1", "negative"});
      xgrad::test::require_error(
          [&] { blas::gemm<double>(false, false, 2, 4, 3, 1.0, buf.data(), 2, buf.data(), 4, 0.0, buf.data(), 4); },
          {"gemm", "'lda' = 2", "3 columns"});
      xgrad::test::require_error(
          [&] { blas::gemm<double>(true, true, 2, 4, 3, 1.0, buf.data(), 2, buf.data(), 2, 0.0, buf.data(), 4); },
          {"gemm", "'ldb' = 2", "3 columns"});
      xgrad::test::require_error(
          [&] { blas::gemm<double>(false, false, 2, 4, 3, 1.0, buf.data(), 3, buf.data(), 4, 0.0, buf.data(), 3); },
          {"gemm", "'ldc' = 3", "4 columns"});
    });
}

// matmul's 1-vs-2-thread bit equality on each backend: test_matmul.cpp.

TEST_CASE("gemm: XGRAD_GEMM and the OpenBLAS core decide the backend", "[gemm]") {
  using blas::Backend;
  CHECK(blas::choose_backend("openblas", "Prescott", Isa::avx512).backend == Backend::openblas);
  CHECK(blas::choose_backend("xgrad", "SkylakeX", Isa::avx512).backend == Backend::xgrad);
  for (const char* env : {static_cast<const char*>(nullptr), "", "auto"}) {
    CHECK(blas::choose_backend(env, "Prescott", Isa::avx512).backend == Backend::xgrad);
    CHECK(blas::choose_backend(env, "Prescott", Isa::avx2).backend == Backend::xgrad);
    CHECK(blas::choose_backend(env, "Sandybridge", Isa::avx2).backend == Backend::xgrad);
    CHECK(blas::choose_backend(env, "Haswell", Isa::avx512).backend == Backend::xgrad);
    CHECK(blas::choose_backend(env, "Zen", Isa::avx2).backend == Backend::openblas);
    CHECK(blas::choose_backend(env, "SkylakeX", Isa::avx512).backend == Backend::openblas);
    CHECK(blas::choose_backend(env, "Cooperlake", Isa::avx512).backend == Backend::openblas);
    CHECK(blas::choose_backend(env, "SomeFutureCore", Isa::avx512).backend == Backend::openblas);
    // Zen 4: AVX2 kernels reach the AVX-512 FMA rate, so OpenBLAS's Haswell ones are kept; SSE3 ones not.
    CHECK(blas::choose_backend(env, "Haswell", Isa::avx512, true).backend == Backend::openblas);
    CHECK(blas::choose_backend(env, "Zen", Isa::avx512, true).backend == Backend::openblas);
    CHECK(blas::choose_backend(env, "Prescott", Isa::avx512, true).backend == Backend::xgrad);
    CHECK(blas::choose_backend(env, "Sandybridge", Isa::avx512, true).backend == Backend::xgrad);
  }
  CHECK(blas::choose_backend(nullptr, "Prescott", Isa::avx512).reason.find("Prescott (sse3)") != std::string::npos);
  xgrad::test::require_error([] { (void)blas::choose_backend("mkl", "Haswell", Isa::avx2); }, {"XGRAD_GEMM", "mkl"});
  CHECK(blas::core_isa("PRESCOTT").isa == Isa::sse3);
  CHECK(blas::core_isa("nehalem").isa == Isa::sse3);
  CHECK(blas::core_isa("Haswell").isa == Isa::avx2);
  CHECK(blas::core_isa("SapphireRapids").isa == Isa::avx512);
  CHECK(!blas::core_isa("Unknown").known);
  // This process: the backend follows XGRAD_GEMM (ctest also runs this case with it set, and under
  // OPENBLAS_CORETYPE=Prescott), else the auto rule on the core OpenBLAS loaded.
  const char* env = std::getenv("XGRAD_GEMM");
  const blas::Choice now = blas::backend();
  CHECK(now.backend ==
        blas::choose_backend(env, blas::core_name(), blas::own_gemm_isa(), blas::avx512_half_rate(cpu_info())).backend);
  if (env && std::string(env) == "xgrad") CHECK(now.backend == Backend::xgrad);
  if (env && std::string(env) == "openblas") CHECK(now.backend == Backend::openblas);
  const blas::CoreIsa core = blas::core_isa(blas::core_name());
  if ((!env || std::string(env) == "auto") && core.known && core.isa < Isa::avx2) CHECK(now.backend == Backend::xgrad);
  // The hook overrides and restores.
  blas::set_backend(Backend::xgrad);
  CHECK(blas::backend().backend == Backend::xgrad);
  blas::reset_backend();
  CHECK(blas::backend().backend == now.backend);
}

TEST_CASE("gemm: kernel_info reports the CPU, OpenBLAS and the backend in use", "[gemm]") {
  const KernelInfo info = kernel_info();
  CHECK(info.openblas_core == blas::core_name());
  CHECK(info.gemm_backend == blas::backend_name(blas::backend().backend));
  // The own GEMM runs the widest family xgrad has for this CPU (cpuid against the report).
  CHECK(blas::own_gemm_isa() == info.cpu.kernel_isa);
  if (info.gemm_backend == "xgrad") CHECK(info.gemm_isa == info.cpu.kernel_isa);
  const std::string s = info.str();
  CHECK(s.find("openblas: core " + info.openblas_core) != std::string::npos);
  CHECK(s.find("gemm: " + info.gemm_backend) != std::string::npos);
  const std::string w = info.warning();
  CHECK(w.empty() == !info.openblas_below_cpu);
  if (info.openblas_core_known && info.openblas_isa < Isa::avx2 && info.cpu.best_isa >= Isa::avx2) CHECK(!w.empty());
  if (!w.empty()) {
    CHECK(w.find("xgrad: OpenBLAS runs its " + info.openblas_core) == 0);
    // auto (no XGRAD_GEMM) uses the own GEMM at least whenever OpenBLAS runs below AVX2
    if (!std::getenv("XGRAD_GEMM") && info.openblas_isa < Isa::avx2) CHECK(w.find("its own GEMM") != std::string::npos);
  }
}
