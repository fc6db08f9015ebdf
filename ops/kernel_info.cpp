#include "xgrad/ops/kernel_info.hpp"

#include <fmt/format.h>

#include "xgrad/ops/kernels/blas.hpp"

namespace xgrad {

KernelInfo kernel_info() {
  KernelInfo k;
  k.cpu = cpu_info();
  k.openblas_core = detail::blas::core_name();
  const detail::blas::CoreIsa ci = detail::blas::core_isa(k.openblas_core);
  k.openblas_isa = ci.isa;
  k.openblas_core_known = ci.known;
  const bool half = detail::blas::avx512_half_rate(k.cpu);
  const auto rate = [half](Isa i) { return half && i == Isa::avx512 ? Isa::avx2 : i; };
  k.openblas_below_cpu = ci.known && rate(ci.isa) < rate(k.cpu.best_isa);
  const detail::blas::Choice choice = detail::blas::backend();
  k.gemm_backend = detail::blas::backend_name(choice.backend);
  k.gemm_isa = choice.backend == detail::blas::Backend::xgrad ? detail::blas::own_gemm_isa() : ci.isa;
  k.gemm_reason = choice.reason;
  return k;
}

std::string KernelInfo::str() const {
  std::string s = cpu.str();
  s += fmt::format("openblas: core {} ({})\n", openblas_core,
                   openblas_core_known ? isa_name(openblas_isa) : "isa unknown");
  const bool isa_known = gemm_backend != "openblas" || openblas_core_known;
  s += fmt::format("gemm: {} ({}; {})\n", gemm_backend, isa_known ? isa_name(gemm_isa) : "isa unknown", gemm_reason);
  return s;
}

std::string KernelInfo::warning() const {
  if (!openblas_below_cpu) return {};
  return fmt::format(
      "xgrad: OpenBLAS runs its {} ({}) kernels on a CPU with {}; xgrad uses {}", openblas_core, isa_name(openblas_isa),
      isa_name(cpu.best_isa),
      gemm_backend == "xgrad" ? std::string("its own GEMM") : "OpenBLAS all the same (" + gemm_reason + ")");
}

}  // namespace xgrad
