#include "xgrad/ops/matmul.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/checked.hpp"
#include "xgrad/core/fused.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/define/sum_to.hpp"
#include "xgrad/ops/kernels/ceil_div.hpp"
#include "xgrad/ops/kernels/tiled_gemm.hpp"
#include "xgrad/ops/shape_ops.hpp"

namespace xgrad {

// Products run through detail::gemm (Note [Deterministic GEMM] in ops/kernels/tiled_gemm.cpp).

namespace {

// The shapes of one matmul call seen as a batch of (m, k) x (k, n) products.
struct MatmulPlan {
  Shape out_shape;
  std::int64_t m = 0, k = 0, n = 0;
  std::int64_t batches = 1;                   // product of the broadcast batch dimensions
  std::int64_t a_batches = 1, b_batches = 1;  // products of a's and b's own batch dimensions
  // Batch index of a and of b for each output batch (empty when both are the identity or a
  // single matrix, which covers everything but real broadcasting between two batched operands).
  std::vector<std::int64_t> a_index, b_index;

  std::int64_t a_at(std::int64_t i) const {
    return a_batches == 1 ? 0 : (a_index.empty() ? i : a_index[static_cast<std::size_t>(i)]);
  }
  std::int64_t b_at(std::int64_t i) const {
    return b_batches == 1 ? 0 : (b_index.empty() ? i : b_index[static_cast<std::size_t>(i)]);
  }
};

// Linear index into `own` (right-aligned against `full`, size-1 dims broadcast) for every linear
// index of `full`.
std::vector<std::int64_t> broadcast_index(const Shape& own, const Shape& full) {
  const std::size_t nd = full.size();
  const std::size_t lead = nd - own.size();
  Shape strides(nd, 0);
  const Shape cs = contiguous_strides(own);
  for (std::size_t d = lead; d < nd; ++d) strides[d] = own[d - lead] == 1 ? 0 : cs[d - lead];
  const std::int64_t total = shape_numel(full);
  std::vector<std::int64_t> out(static_cast<std::size_t>(total));
  for (std::int64_t i = 0; i < total; ++i) {
    std::int64_t rem = i, off = 0;
    for (std::size_t d = nd; d-- > 0;) {
      off += (rem % full[d]) * strides[d];
      rem /= full[d];
    }
    out[static_cast<std::size_t>(i)] = off;
  }
  return out;
}

MatmulPlan make_plan(const Tensor& a, const Tensor& b) {
  XGRAD_CHECK(a.defined() && b.defined(), "matmul: argument '{}' is an undefined tensor", a.defined() ? "b" : "a");
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  XGRAD_CHECK(a.dtype() == b.dtype(), "matmul: dtype mismatch: a is {} {}, b is {} {} (convert one with .to())",
              a.dtype(), shape_str(sa), b.dtype(), shape_str(sb));
  XGRAD_CHECK(!sa.empty() && !sb.empty(),
              "matmul: both arguments need at least 1 dimension, got a {} and b {} (use mul for scalars)",
              shape_str(sa), shape_str(sb));
  MatmulPlan p;
  const bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
  p.m = a_vec ? 1 : sa[sa.size() - 2];
  p.k = sa.back();
  p.n = b_vec ? 1 : sb.back();
  const std::int64_t kb = b_vec ? sb[0] : sb[sb.size() - 2];
  XGRAD_CHECK(p.k == kb,
              "matmul: shape mismatch: a {} and b {}: a's last dimension ({}) must equal b's {} dimension ({})",
              shape_str(sa), shape_str(sb), p.k, b_vec ? "only" : "second-to-last", kb);
  const Shape a_batch(sa.begin(), sa.end() - (a_vec ? 1 : 2));
  const Shape b_batch(sb.begin(), sb.end() - (b_vec ? 1 : 2));
  Shape batch;
  if (a_batch == b_batch) {
    batch = a_batch;
  } else {
    const std::size_t nd = std::max(a_batch.size(), b_batch.size());
    batch.assign(nd, 1);
    for (std::size_t d = 0; d < nd; ++d) {
      const std::int64_t x = d + a_batch.size() >= nd ? a_batch[d + a_batch.size() - nd] : 1;
      const std::int64_t y = d + b_batch.size() >= nd ? b_batch[d + b_batch.size() - nd] : 1;
      XGRAD_CHECK(x == y || x == 1 || y == 1,
                  "matmul: batch dimensions of a {} and b {} do not broadcast: {} vs {} at batch dimension {}",
                  shape_str(sa), shape_str(sb), x, y, d);
      batch[d] = x == 1 ? y : x;
    }
  }
  p.batches = shape_numel(batch);
  p.a_batches = shape_numel(a_batch);
  p.b_batches = shape_numel(b_batch);
  // When one operand is a single matrix the other's batches are the output's, in order; only two
  // batched operands can need index maps.
  if (p.a_batches != 1 && p.b_batches != 1 && !(a_batch == batch && b_batch == batch)) {
    p.a_index = broadcast_index(a_batch, batch);
    p.b_index = broadcast_index(b_batch, batch);
  }
  p.out_shape = batch;
  if (!a_vec) p.out_shape.push_back(p.m);
  if (!b_vec) p.out_shape.push_back(p.n);
  checked_numel(p.out_shape, "matmul", "a, b");  // the broadcast batch times (m, n) must exist
  return p;
}

// Runs task(slot) for slot in [0, slots) as parallel tasks of at least kSlotTaskWork multiply-adds
// (a slot's own large GEMMs parallelise further inside detail::gemm). Each slot writes its own
// output, so the result does not depend on the thread count.
constexpr std::int64_t kSlotTaskWork = std::int64_t{1} << 19;  // multiply-adds per task, at least

template <class Task>
void for_each_slot(std::int64_t slots, std::int64_t work_per_slot, Task&& task) {
  const std::int64_t grain = std::max<std::int64_t>(1, kSlotTaskWork / std::max<std::int64_t>(1, work_per_slot));
  parallel_for(0, slots, grain, [&](std::int64_t s0, std::int64_t s1) {
    for (std::int64_t s = s0; s < s1; ++s) task(s);
  });
}

// For each destination batch (of a or of b), the output batches that map to it, increasing.
struct Groups {
  std::vector<std::int64_t> start, items;
};
Groups group_by(std::int64_t dest_count, std::int64_t batches, const std::vector<std::int64_t>& index) {
  Groups g;
  g.start.assign(static_cast<std::size_t>(dest_count + 1), 0);
  for (std::int64_t i = 0; i < batches; ++i)
    ++g.start[static_cast<std::size_t>(index[static_cast<std::size_t>(i)] + 1)];
  for (std::size_t d = 0; d + 1 < g.start.size(); ++d) g.start[d + 1] += g.start[d];
  g.items.resize(static_cast<std::size_t>(batches));
  std::vector<std::int64_t> fill(g.start.begin(), g.start.end() - 1);
  for (std::int64_t i = 0; i < batches; ++i)
    g.items[static_cast<std::size_t>(fill[static_cast<std::size_t>(index[static_cast<std::size_t>(i)])]++)] = i;
  return g;
}

template <class T>
void forward_kernel(const MatmulPlan& p, const T* a, const T* b, T* c) {
  const std::int64_t m = p.m, k = p.k, n = p.n;
  if (p.b_batches == 1 && p.a_index.empty()) {
    // b is one matrix and a's batches are the output's: one (batches*m, k) x (k, n) product.
    detail::gemm<T>(false, false, p.batches * m, n, k, a, k, b, n, T(0), c, n);
    return;
  }
  for_each_slot(p.batches, m * n * k, [&](std::int64_t i) {
    detail::gemm<T>(false, false, m, n, k, a + p.a_at(i) * m * k, k, b + p.b_at(i) * k * n, n, T(0), c + i * m * n, n);
  });
}

// dA = G B^T per output batch, summed into a's batch slots in increasing output-batch order.
template <class T>
void grad_a_kernel(const MatmulPlan& p, const T* g, const T* b, T* da) {
  const std::int64_t m = p.m, k = p.k, n = p.n;
  if (p.b_batches == 1 && p.a_index.empty() && p.a_batches == p.batches) {
    detail::gemm<T>(false, true, p.batches * m, k, n, g, n, b, n, T(0), da, k);
    return;
  }
  if (p.a_batches == 1) {
    if (p.batches == 0) std::fill(da, da + m * k, T(0));
    for (std::int64_t i = 0; i < p.batches; ++i)
      detail::gemm<T>(false, true, m, k, n, g + i * m * n, n, b + p.b_at(i) * k * n, n, i == 0 ? T(0) : T(1), da, k);
    return;
  }
  std::vector<std::int64_t> identity;
  const std::vector<std::int64_t>* index = &p.a_index;
  if (index->empty()) {
    identity.resize(static_cast<std::size_t>(p.batches));
    for (std::int64_t i = 0; i < p.batches; ++i) identity[static_cast<std::size_t>(i)] = i;
    index = &identity;
  }
  const Groups grp = group_by(p.a_batches, p.batches, *index);
  for_each_slot(p.a_batches, m * n * k * std::max<std::int64_t>(1, p.batches / std::max<std::int64_t>(1, p.a_batches)),
                [&](std::int64_t s) {
                  T* dst = da + s * m * k;
                  const auto lo = grp.start[static_cast<std::size_t>(s)],
                             hi = grp.start[static_cast<std::size_t>(s + 1)];
                  if (lo == hi) std::fill(dst, dst + m * k, T(0));
                  for (auto j = lo; j < hi; ++j) {
                    const std::int64_t i = grp.items[static_cast<std::size_t>(j)];
                    detail::gemm<T>(false, true, m, k, n, g + i * m * n, n, b + p.b_at(i) * k * n, n,
                                    j == lo ? T(0) : T(1), dst, k);
                  }
                });
}

// dB = A^T G per output batch, summed into b's batch slots in increasing output-batch order.
template <class T>
void grad_b_kernel(const MatmulPlan& p, const T* a, const T* g, T* db) {
  const std::int64_t m = p.m, k = p.k, n = p.n;
  if (p.b_batches == 1 && p.a_index.empty()) {
    // Sum over batches of A_i^T G_i is one product: (k, batches*m) x (batches*m, n).
    detail::gemm<T>(true, false, k, n, p.batches * m, a, k, g, n, T(0), db, n);
    return;
  }
  std::vector<std::int64_t> identity;
  const std::vector<std::int64_t>* index = &p.b_index;
  if (index->empty()) {
    identity.resize(static_cast<std::size_t>(p.batches));
    for (std::int64_t i = 0; i < p.batches; ++i) identity[static_cast<std::size_t>(i)] = i;
    index = &identity;
  }
  const Groups grp = group_by(p.b_batches, p.batches, *index);
  for_each_slot(p.b_batches, m * n * k * std::max<std::int64_t>(1, p.batches / std::max<std::int64_t>(1, p.b_batches)),
                [&](std::int64_t s) {
                  T* dst = db + s * k * n;
                  const auto lo = grp.start[static_cast<std::size_t>(s)],
                             hi = grp.start[static_cast<std::size_t>(s + 1)];
                  if (lo == hi) std::fill(dst, dst + k * n, T(0));
                  for (auto j = lo; j < hi; ++j) {
                    const std::int64_t i = grp.items[static_cast<std::size_t>(j)];
                    detail::gemm<T>(true, false, k, n, m, a + p.a_at(i) * m * k, k, g + i * m * n, n,
                                    j == lo ? T(0) : T(1), dst, n);
                  }
                });
}

// The gradients of C = A B as ops (Note [Fused ops]): dA = G B^T and dB = A^T G summed over
// broadcast batches, by the GEMM kernels above, or (when the result will be differentiated) as
// recorded matmuls with 1-d operands viewed as (1, k) and (k, 1) and broadcast batches summed by
// detail::sum_to. The formula transposes a copy; the kernels read B and A in place through the BLAS
// transpose flags.
Tensor matrix_grad(const Tensor& g, const Shape& a_shape, const Shape& b_shape) {
  Shape gs = g.shape();
  if (b_shape.size() == 1) gs.push_back(1);
  if (a_shape.size() == 1) gs.insert(gs.end() - 1, 1);
  return reshape(g, gs);
}
Tensor transpose_last(const Tensor& x) { return transpose(x, x.dim() - 2, x.dim() - 1); }

struct MatmulBackwardA {
  static constexpr const char* kName = "matmul_backward_a";
  static Tensor kernel(const Tensor& g, const Tensor& b, const MatmulPlan& p, const Shape& a_shape, const Shape&) {
    Tensor da = Tensor::empty(a_shape, g.dtype());
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      grad_a_kernel<T>(p, g.data<T>(), b.data<T>(), da.data<T>());
    });
    return da;
  }
  static Tensor formula(const Tensor& g, const Tensor& b, const MatmulPlan&, const Shape& a_shape,
                        const Shape& b_shape) {
    const Tensor b2 = b_shape.size() == 1 ? reshape(b, {b_shape[0], 1}) : b;
    const Shape a2 = a_shape.size() == 1 ? Shape{1, a_shape[0]} : a_shape;
    return reshape(detail::sum_to(matmul(matrix_grad(g, a_shape, b_shape), transpose_last(b2)), a2), a_shape);
  }
};

struct MatmulBackwardB {
  static constexpr const char* kName = "matmul_backward_b";
  static Tensor kernel(const Tensor& g, const Tensor& a, const MatmulPlan& p, const Shape&, const Shape& b_shape) {
    Tensor db = Tensor::empty(b_shape, g.dtype());
    dispatch(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      grad_b_kernel<T>(p, a.data<T>(), g.data<T>(), db.data<T>());
    });
    return db;
  }
  static Tensor formula(const Tensor& g, const Tensor& a, const MatmulPlan&, const Shape& a_shape,
                        const Shape& b_shape) {
    const Tensor a2 = a_shape.size() == 1 ? reshape(a, {1, a_shape[0]}) : a;
    const Shape b2 = b_shape.size() == 1 ? Shape{b_shape[0], 1} : b_shape;
    return reshape(detail::sum_to(matmul(transpose_last(a2), matrix_grad(g, a_shape, b_shape)), b2), b_shape);
  }
};

// C = A B with torch.matmul's shape rules; dA = G B^T, dB = A^T G (summed over broadcast batches).
struct MatMul : Function<MatMul> {
  static constexpr const char* kName = "matmul";
  MatmulPlan plan;
  Shape a_shape, b_shape;

  Tensor forward(const Tensor& a, const Tensor& b) {
    plan = make_plan(a, b);
    Tensor c = Tensor::empty(plan.out_shape, a.dtype());
    dispatch(a.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      forward_kernel<T>(plan, a.data<T>(), b.data<T>(), c.data<T>());
    });
    if (needs_input_grad(0) || needs_input_grad(1)) {
      a_shape = a.shape();
      b_shape = b.shape();
      // dA needs only b, dB needs only a.
      save_for_backward({needs_input_grad(1) ? a : Tensor(), needs_input_grad(0) ? b : Tensor()});
    }
    return c;
  }

  static constexpr bool kDifferentiableBackward = true;  // through MatmulBackwardA and MatmulBackwardB

  Tensors backward(const Tensors& grads) {
    const Tensor& g = grads[0];
    const Tensors s = saved();
    Tensor da, db;
    if (needs_input_grad(0)) da = apply_fused<MatmulBackwardA>(g, s[1], plan, a_shape, b_shape);
    if (needs_input_grad(1)) db = apply_fused<MatmulBackwardB>(g, s[0], plan, a_shape, b_shape);
    return {da, db};
  }
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) { return apply<MatMul>(a, b); }

}  // namespace xgrad
