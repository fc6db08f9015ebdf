#pragma once
// Internal: the CSR kernels behind ops/sparse.cpp (Note [CSR kernels] in sparse_kernels.cpp).
// Instantiated for float and double.
#include <cstdint>

namespace xgrad::detail {

/// out (rows x f) = A·x: row i of out = Σ_k vals[perm ? perm[k] : k]·x[col[k], :] over k in
/// [crow[i], crow[i + 1]), summed in k order. x is (any rows x f), row-major.
template <class T>
void csr_spmm(std::int64_t rows, const std::int64_t* crow, const std::int64_t* col, const T* vals,
              const std::int64_t* perm, const T* x, std::int64_t f, T* out);

/// out[k] = ⟨x[i, :], y[col[k], :]⟩ for every entry k of row i (x: rows x f, y: any rows x f).
template <class T>
void csr_sddmm(std::int64_t rows, const std::int64_t* crow, const std::int64_t* col, const T* x, const T* y,
               std::int64_t f, T* out);

/// out[i, :] = scale_i · Σ_e data[e, :] over e in [off[i], off[i + 1]), summed in e order; scale_i =
/// 1 / (off[i + 1] - off[i]) when `mean` (NaN for an empty segment, as torch.segment_reduce), else 1.
template <class T>
void segment_sum(std::int64_t segments, const std::int64_t* off, const T* data, std::int64_t f, bool mean, T* out);

/// out[e, :] = scale_i · g[i, :] for every e of segment i (the transpose of segment_sum).
template <class T>
void segment_expand(std::int64_t segments, const std::int64_t* off, const T* g, std::int64_t f, bool mean, T* out);

/// out[e, :] = softmax over the entries e of segment i of data[e, :] (per column, max-subtracted).
template <class T>
void segment_softmax(std::int64_t segments, const std::int64_t* off, const T* data, std::int64_t f, T* out);

/// dx[e, :] = y[e, :]·(g[e, :] − Σ_{e' in segment i} g[e', :]·y[e', :]) (softmax's backward).
template <class T>
void segment_softmax_backward(std::int64_t segments, const std::int64_t* off, const T* g, const T* y, std::int64_t f,
                              T* dx);

}  // namespace xgrad::detail
