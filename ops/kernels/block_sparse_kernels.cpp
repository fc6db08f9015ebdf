// Kernels of block_sparse_linear: for groups up to 16 wide, register-tiled "lane" kernels on transposed
// operands (Note [Lane kernels]); for groups 17-64 wide in whole tiles, register-tiled kernels reading
// the operands in place (Note [Tile kernels]); for other groups, per-task single-threaded CBLAS GEMMs
// over strided views or gathered panels. See Note [Block-sparse parallelism] in block_sparse_linear.hpp.
// On CPUs with AVX-512 the float32 lane and tile kernels run 16 lanes wide (block_sparse_simd512.hpp),
// and the tiles then also take groups up to 256 wide (128 when OpenBLAS runs AVX-512 kernels).
#include "xgrad/ops/kernels/block_sparse_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "xgrad/core/detail/cpu.hpp"
#include "xgrad/core/parallel.hpp"
#include "xgrad/ops/kernels/blas.hpp"
#include "xgrad/ops/kernels/block_sparse_simd512.hpp"
#include "xgrad/ops/kernels/block_sparse_tiles.hpp"
#include "xgrad/ops/kernels/instantiate.hpp"
#include "xgrad/ops/kernels/simd.hpp"

namespace xgrad::detail {

namespace bsl512 {
const Kernels* kernels() { return avx512_enabled() ? table() : nullptr; }
}  // namespace bsl512

namespace {

// The AVX-512 kernels (block_sparse_simd512.hpp) for float32 on a CPU that has them, else null.
template <class T>
const bsl512::Kernels* simd512() {
  if constexpr (std::is_same_v<T, float>)
    return bsl512::kernels();
  else
    return nullptr;
}

// Batch rows per forward / input-gradient task and per weight-gradient accumulation step. Fixed, so
// the partition (and the summation order) never depends on the thread count.
constexpr std::int64_t kBatchTile = 256;
constexpr std::int64_t kWeightBatchChunk = 1024;
// A weight-gradient task gathers at most this many input columns of one row group (or one block).
constexpr std::int64_t kWeightPanelCols = 512;
// Below this many multiply-adds a call runs serially (tasks would cost more than they save).
constexpr double kSerialWork = 1 << 16;

// Row-major C (m x n) = op(A) op(B) + beta C: one single-threaded BLAS call (ops/kernels/blas.hpp; our
// tasks already use every allowed thread, Note [OpenBLAS threading]).
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  blas::gemm<float>(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t lda,
          const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  blas::gemm<double>(ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// Per-thread scratch panels, grown on demand and kept: a fresh multi-megabyte allocation per task
// would page-fault its way in every call (glibc serves it with mmap), which costs more than the copy.
// Slots 0 and 1 are used inside one task (nothing nests there).
template <class T>
T* scratch(int slot, std::int64_t n) {
  thread_local std::vector<T> panels[2];
  auto& v = panels[slot];
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// Per-call panel (the transposed operands of the lane kernels), shared by the call's tasks: the calling
// thread's kept buffer, or a fresh one when that is busy (the thread waits in a parallel_for and TBB
// ran another block-sparse call on it).
template <class T>
class CallPanel {
 public:
  CallPanel(int slot, std::int64_t n) {
    thread_local std::vector<T> kept[2];
    thread_local bool busy[2] = {false, false};
    if (!busy[slot]) {
      busy_ = &busy[slot];
      *busy_ = true;
      v_ = &kept[slot];
    } else {
      v_ = &own_;
    }
    if (static_cast<std::int64_t>(v_->size()) < n) v_->resize(static_cast<std::size_t>(n));
  }
  ~CallPanel() {
    if (busy_) *busy_ = false;
  }
  CallPanel(const CallPanel&) = delete;
  CallPanel& operator=(const CallPanel&) = delete;
  T* data() { return v_->data(); }

 private:
  std::vector<T> own_;
  std::vector<T>* v_ = nullptr;
  bool* busy_ = nullptr;
};

// Short strided copies (a block's row, often 8-64 elements): an inline vectorised loop, because a
// memcpy call per segment costs more than the copy itself. GCC would turn the loop back into a
// memcpy call, hence the attribute.
template <class T>
__attribute__((optimize("no-tree-loop-distribute-patterns"))) inline void copy_segment(const T* __restrict src,
                                                                                       std::int64_t n,
                                                                                       T* __restrict dst) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// Runs task(t) for t in [0, n): in parallel when the call has enough work.
template <class Fn>
void run_tasks(std::int64_t n, double work, Fn&& task) {
  const std::int64_t grain = work < kSerialWork ? std::max<std::int64_t>(n, 1) : 1;
  parallel_for(0, n, grain, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) task(t);
  });
}

std::int64_t num_tiles(std::int64_t m) { return (m + kBatchTile - 1) / kBatchTile; }

// Note [Lane kernels]: for narrow groups (at most kLaneMaxGroup rows or columns; any block shape,
// float and double), a GEMM call per group spends more on packing and call overhead than on
// arithmetic, and a kernel with the group's outputs in the vector lanes gets too few FMAs per
// broadcast. These kernels put the batch in the vector lanes instead, on transposed operands built once
// per call: xT (in x Mp) or gT (out x Mp), Mp = M rounded up to whole vectors, padding columns zero.
// Forward:        yT[row + o, m]  = sum over blocks B of the row group, j < cols(B):  W_B[o, j] xT[col_B + j, m]
// Input gradient: dxT[col + c, m] = sum over blocks B of the column group, o < rows(B): W_B[o, c] gT[row_B + o, m]
// Both are the same tile (bsl::lane_tile in block_sparse_tiles.hpp): 4 outputs x 3 vectors of batch rows
// in 12 accumulators; per inner index k, 3 vector loads of the transposed operand, 4 weight broadcasts,
// 12 FMAs (a group's last tile has the outputs that remain). A task (one group x 96 batch rows) sums
// into a local panel and transposes it into y (adding the bias) or dx.
// Weight gradient:
//   dW_B[o, c] = sum_m gT[row_B + o, m] xT[col_B + c, m]
// as tiles of (lanes) dot products accumulated over the batch in vectors, then reduced across lanes by
// a fixed shuffle tree. Every output is summed in an order fixed by the pattern and M alone (blocks in
// order, k ascending; batch vectors ascending, then the fixed lane tree), so results do not depend on
// the thread count. Measured (in = out = 4096, batch 256): with 8x8 blocks faster than the GEMM path,
// with 32x32 blocks slower (the transposes and the 4 x 3 tile lose to OpenBLAS's kernel there), hence
// the limit of 16 (bench/results/tuning_notes.md, "Block-sparse linear").
constexpr std::int64_t kLaneMaxGroup = 16;
constexpr int kLaneOuts = 4, kLaneVecs = 3;
// Inner indices per segment chunk: kLaneChunkK x kLaneVecs vectors of the operand fit in L1.
constexpr std::int64_t kLaneChunkK = 256;
// Batch rows per forward / input-gradient task: a task sweeps its group's segments over this many
// batch rows (a multiple of 3 vectors so that full tiles dominate).
constexpr std::int64_t kLaneTaskVecs = 12;

// xsimd batches of this file's architecture (Note [Kernel architectures] in ops/kernels/simd.hpp):
// 8 float or 4 double lanes with XGRAD_ARCH = x86-64-v3.
using Arch = xsimd::default_arch;

template <class T>
inline simd::batch<T, Arch> load_v(const T* p) {
  return simd::load<T, Arch>(p);
}
template <class T>
inline void store_v(T* p, const simd::batch<T, Arch>& v) {
  simd::store<T, Arch>(p, v);
}

// The segments of the lane and tile sweeps (block_sparse_simd512.hpp): the AVX-512 kernels' types, so the
// same segment list serves both widths.
using bsl512::LaneSeg;
using bsl512::TileSeg;

// 8 x 8 float transpose in registers: d[c * ldd + r] = s[r * lds + c] (+ bias[r] when given).
inline void transpose8(const float* s, std::int64_t lds, float* d, std::int64_t ldd, const float* bias) {
  using V = simd::batch<float, Arch>;
  static_assert(simd::lanes<float, Arch> == 8, "transpose8: 8 float lanes");
  V r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = load_v(s + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = simd::shuffle<0, 8, 1, 9, 4, 12, 5, 13>(r[i], r[i + 1]);
    t[i + 1] = simd::shuffle<2, 10, 3, 11, 6, 14, 7, 15>(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4)
    for (int j = 0; j < 2; ++j) {
      u[i + 2 * j] = simd::shuffle<0, 1, 8, 9, 4, 5, 12, 13>(t[i + j], t[i + j + 2]);
      u[i + 2 * j + 1] = simd::shuffle<2, 3, 10, 11, 6, 7, 14, 15>(t[i + j], t[i + j + 2]);
    }
  V b(0.0f);
  if (bias) b = load_v(bias);
  for (int j = 0; j < 4; ++j) {
    store_v(d + j * ldd, simd::shuffle<0, 1, 2, 3, 8, 9, 10, 11>(u[j], u[j + 4]) + b);
    store_v(d + (j + 4) * ldd, simd::shuffle<4, 5, 6, 7, 12, 13, 14, 15>(u[j], u[j + 4]) + b);
  }
}

// dst[c * ldd + r] = src[r * lds + c] (+ bias[r] when given) for r < rows, c < cols; serial.
template <class T>
void transpose_block(const T* src, std::int64_t rows, std::int64_t cols, std::int64_t lds, T* dst, std::int64_t ldd,
                     const T* bias) {
  std::int64_t r0 = 0;
  if constexpr (std::is_same_v<T, float> && simd::lanes<float, Arch> == 8) {
    const std::int64_t c8 = cols / 8 * 8;
    for (; r0 + 8 <= rows; r0 += 8) {
      for (std::int64_t c = 0; c < c8; c += 8)
        transpose8(src + r0 * lds + c, lds, dst + c * ldd + r0, ldd, bias ? bias + r0 : nullptr);
      for (std::int64_t c = c8; c < cols; ++c)
        for (std::int64_t r = r0; r < r0 + 8; ++r) dst[c * ldd + r] = src[r * lds + c] + (bias ? bias[r] : T(0));
    }
  }
  for (; r0 < rows; r0 += 8) {
    const std::int64_t r1 = std::min(rows, r0 + 8);
    for (std::int64_t c = 0; c < cols; ++c)
      for (std::int64_t r = r0; r < r1; ++r) dst[c * ldd + r] = src[r * lds + c] + (bias ? bias[r] : T(0));
  }
}

// dst (cols x ldd) = src (rows x cols, row stride lds) transposed, dst[c * ldd + r]; dst columns
// [rows, pad_to) are zeroed. Tasks over 64-column strips x 512-row bands.
template <class T>
void transpose(const T* src, std::int64_t rows, std::int64_t cols, std::int64_t lds, T* dst, std::int64_t ldd,
               std::int64_t pad_to) {
  constexpr std::int64_t kStrip = 64, kRows = 512;
  const std::int64_t strips = (cols + kStrip - 1) / kStrip,
                     bands = std::max<std::int64_t>(1, (rows + kRows - 1) / kRows);
  run_tasks(strips * bands, double(rows) * double(cols) / 8, [&](std::int64_t t) {
    const std::int64_t c0 = (t / bands) * kStrip, c1 = std::min(cols, c0 + kStrip);
    const std::int64_t band = t % bands, r0 = band * kRows, r1 = std::min(rows, r0 + kRows);
    transpose_block(src + r0 * lds + c0, r1 - r0, c1 - c0, lds, dst + c0 * ldd + r0, ldd,
                    static_cast<const T*>(nullptr));
    if (pad_to > rows && band == bands - 1)
      for (std::int64_t c = c0; c < c1; ++c) std::fill(dst + c * ldd + rows, dst + c * ldd + pad_to, T(0));
  });
}

// dst[i, begin_g + o] = bias[begin_g + o] + the lane sweep of group g's segments
// (segs[seg_ptr[g] : seg_ptr[g + 1]]) at batch row i < m, for every group g (bias may be null: zero;
// groups without segments give the bias). Tasks: groups x batch chunks of kLaneTaskVecs vectors; a task
// sums into a local (group x chunk) panel, then transposes it into dst. Inside a task, per tile of
// kLaneVecs vectors, the segments are swept in chunks of about kLaneChunkK inner indices, all output
// rows of the group per chunk, so the chunk's slice of the transposed operand is read from L1 by every
// output tile.
template <class T>
void lane_sweep(const std::vector<BlockCsr::Group>& groups, std::span<const std::int64_t> seg_ptr,
                const std::vector<LaneSeg<T>>& segs, std::int64_t mp, std::int64_t m, T* dst, std::int64_t ldd,
                const T* bias, double work) {
  constexpr int L = simd::lanes<T, Arch>;
  constexpr std::int64_t ldo = kLaneTaskVecs * L;
  const std::int64_t nvec = mp / L, chunks = (nvec + kLaneTaskVecs - 1) / kLaneTaskVecs;
  const std::int64_t ngroups = static_cast<std::int64_t>(groups.size());
  run_tasks(ngroups * chunks, work, [&](std::int64_t t) {
    const std::int64_t g = t / chunks, v0 = (t % chunks) * kLaneTaskVecs, v1 = std::min(nvec, v0 + kLaneTaskVecs);
    const std::int64_t i0 = v0 * L, rows = std::min(m, v1 * L) - i0;
    const auto& grp = groups[static_cast<std::size_t>(g)];
    const std::int64_t s0 = seg_ptr[static_cast<std::size_t>(g)], s1 = seg_ptr[static_cast<std::size_t>(g) + 1];
    T* dg = dst + i0 * ldd + grp.begin;
    const T* bg = bias ? bias + grp.begin : nullptr;
    if (s0 == s1) {
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t o = 0; o < grp.size; ++o) dg[i * ldd + o] = bg ? bg[o] : T(0);
      return;
    }
    T* loc = scratch<T>(0, grp.size * ldo);
    // Rows [i0, v1 * L): for the AVX-512 kernels a multiple of 16 (tasks start at multiples of 96 rows, mp
    // is padded to 16).
    auto lane_group = &bsl::lane_group<T, Arch, kLaneOuts, kLaneVecs>;
    if constexpr (std::is_same_v<T, float>)
      if (const bsl512::Kernels* k512 = simd512<T>()) lane_group = k512->lane_group;
    lane_group(segs.data() + s0, s1 - s0, mp, i0, (v1 - v0) * L, grp.size, loc, ldo, kLaneChunkK);
    transpose_block(loc, grp.size, rows, ldo, dg, ldd, bg);
  });
}

// Batch rows of the transposed operands: M rounded up to 64 bytes (whole AVX-512 vectors, so that
// both widths of the kernels can sweep them).
template <class T>
std::int64_t lane_padded(std::int64_t m) {
  constexpr std::int64_t L = 64 / static_cast<std::int64_t>(sizeof(T));
  return std::max<std::int64_t>(L, (m + L - 1) / L * L);
}

// True when every group has at most kLaneMaxGroup elements.
bool lane_groups(const std::vector<BlockCsr::Group>& groups) {
  for (const auto& g : groups)
    if (g.size > kLaneMaxGroup) return false;
  return true;
}

template <class T>
void lane_forward(const BlockCsr& p, const T* x, std::int64_t m, const T* w, const T* b, T* y) {
  const std::int64_t in = p.in, out = p.out, mp = lane_padded<T>(m);
  const auto& blocks = p.blocks;
  CallPanel<T> xt_panel(0, in * mp);
  T* xt = xt_panel.data();
  transpose(x, m, in, in, xt, mp, mp);
  std::vector<LaneSeg<T>> segs;
  segs.reserve(blocks.size());
  for (const auto& bl : blocks) segs.push_back({xt + bl.col * mp, bl.cols, w + bl.offset, 1, bl.cols});
  lane_sweep(p.row_groups, p.row_ptr, segs, mp, m, y, out, b, double(mp) * double(p.stored));
}

template <class T>
void lane_input_grad(const BlockCsr& p, const T* g, std::int64_t m, const T* w, T* dx) {
  const std::int64_t in = p.in, out = p.out, mp = lane_padded<T>(m);
  const auto& blocks = p.blocks;
  CallPanel<T> gt_panel(0, out * mp);
  T* gt = gt_panel.data();
  transpose(g, m, out, out, gt, mp, mp);
  std::vector<LaneSeg<T>> segs;
  segs.reserve(blocks.size());
  for (std::int64_t k : p.col_index) {
    const auto& bl = blocks[static_cast<std::size_t>(k)];
    segs.push_back({gt + bl.row * mp, bl.rows, w + bl.offset, bl.cols, 1});
  }
  lane_sweep(p.col_groups, p.col_ptr, segs, mp, m, dx, in, static_cast<const T*>(nullptr),
             double(mp) * double(p.stored));
}

// dW_B for the blocks [k0, k1) of one row group, from gT (out x mp) and xT (in x mp).
template <class T>
void lane_weight_blocks(const BlockCsr& p, const T* gt, const T* xt, std::int64_t mp, std::int64_t k0, std::int64_t k1,
                        T* dw) {
  auto lane_weight = &bsl::lane_weight<T, Arch>;
  if constexpr (std::is_same_v<T, float>)
    if (const bsl512::Kernels* k512 = simd512<T>()) lane_weight = k512->lane_weight;
  const auto& blocks = p.blocks;
  for (std::int64_t k = k0; k < k1; ++k) {
    const auto& bl = blocks[static_cast<std::size_t>(k)];
    lane_weight(gt + bl.row * mp, xt + bl.col * mp, mp, bl.rows, bl.cols, dw + bl.offset);
  }
}

template <class T>
void lane_weight_grad(const BlockCsr& p, const T* g, const T* x, std::int64_t m, T* dw) {
  const std::int64_t in = p.in, out = p.out, mp = lane_padded<T>(m);
  CallPanel<T> gt_panel(0, out * mp), xt_panel(1, in * mp);
  T* gt = gt_panel.data();
  T* xt = xt_panel.data();
  transpose(g, m, out, out, gt, mp, mp);
  transpose(x, m, in, in, xt, mp, mp);
  // Tasks: runs of at most kLaneWeightRun blocks of one row group (they share gT's rows).
  constexpr std::int64_t kLaneWeightRun = 8;
  const auto& ptr = p.row_ptr;
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;
  for (std::size_t r = 0; r + 1 < ptr.size(); ++r)
    for (std::int64_t k = ptr[r]; k < ptr[r + 1]; k += kLaneWeightRun)
      runs.emplace_back(k, std::min(ptr[r + 1], k + kLaneWeightRun));
  run_tasks(static_cast<std::int64_t>(runs.size()), double(mp) * double(p.stored), [&](std::int64_t t) {
    const auto [k0, k1] = runs[static_cast<std::size_t>(t)];
    lane_weight_blocks(p, gt, xt, mp, k0, k1, dw);
  });
}

// Note [Tile kernels]: groups 17-32 wide whose width is a whole number of tile columns (32x32
// blocks; float and double). OpenBLAS falls well short of its dense rate on GEMMs with 32 outputs
// per call (bench/results/tuning_notes.md): it packs the (batch x K) operand for every row group, on top of our own
// gather, and its weight-gradient GEMM has only 32 output rows. These kernels keep a register tile of R x NV vectors (R
// = 6 rows, NV = 2 vectors: 12 accumulators, per inner index 2 vector loads, 6 broadcasts, 12 FMAs) and read the
// operands where they are: Forward:        y[i, row + o]   = b[row + o] + sum_B sum_j x[i, col_B + j] Wt_B[j, o] (Wt_B:
// the block
//                 transposed per task, so the 32 outputs of an inner index are contiguous)
// Input gradient: dx[i, col + c]  = sum_B sum_o g[i, row_B + o] W_B[o, c]               (W_B as stored)
// The batch rows of a tile are read in place (each row's 32 inner indices are 2 cache lines reused by
// all 32 outputs); the inner dimension is swept in chunks of kTileChunkK so that the coefficient chunk
// stays in L1 for every row tile, the partial sums going through the output (the same additions in
// the same order as one sweep).
// Weight gradient: dW_B[o, c] = sum_i g[i, row_B + o] x[i, col_B + c]. Here the sum runs down the batch,
// which in x and g is a 16 KB stride (4096 features): every step a new page and the same L1 sets. The
// 8-lane tiles first copy both once per call into group-blocked panels, xc[group][i][c] and
// gc[group][i][o] (only groups that have blocks), then tiles of R block rows x NV vectors of block
// columns accumulate over batch chunks of kTileChunkBytes (both panels' chunks in L1). The AVX-512
// tiles (every block a multiple of 32 wide) read g and x in place instead, in batch chunks of
// kWeightBatchChunk rows: on Zen 4 that measured faster than the panel copy (8 MB written and read
// back per call) for 64 groups of 64, as fast as libxsmm's JIT kernel on the same operands; 32x32 and
// 128x128 blocks at density 1/16 also gained, 16 groups of 256 did not change
// (bench/results/tuning_notes.md, "Block-sparse linear"). The sums are the same either way.
// Every output is summed in an order fixed by the pattern and M (blocks in order, inner index
// ascending; batch ascending), independent of the thread count.
constexpr int kTileRows = 6, kTileVecs = 2;
constexpr std::int64_t kTileMinGroup = 17, kTileMaxGroup = 64;
constexpr std::int64_t kTileChunkK = 128;
// Bytes of the two panels' batch chunks swept by a weight-gradient block (in L1 together).
constexpr std::int64_t kTileChunkBytes = 32 << 10;
// Blocks wider than 32 take the weight-gradient tiles only with at least this many blocks per used
// column group: the panel copy of x is then shared by enough blocks (measured, 64x64 blocks: density
// 1/64, about 1 block per column group, slower than the GEMM path; density 1/4 faster).
constexpr double kTileWideMinReuse = 4;

// With the AVX-512 kernels (float32, widths a multiple of 32), wider groups and blocks take the tiles
// too: up to 256 wide while OpenBLAS runs AVX2 kernels (on the machine measured, whose environment
// sets OPENBLAS_CORETYPE=Haswell, our tiles beat the GEMM path on 16 groups of 256), up to 128 when it
// runs its AVX-512 ones (its GEMM path then matches our tiles at 128 and beats them at 256;
// bench/results/tuning_notes.md, "Block-sparse linear").
constexpr std::int64_t kTileMaxGroup512 = 256, kTileMaxGroup512Blas512 = 128;

// True when blas::gemm runs AVX-512 kernels: OpenBLAS on the core it chose at load time (by CPU or
// OPENBLAS_CORETYPE), or xgrad's own GEMM (Note [GEMM backend] in blas.cpp) in its AVX-512 family. Asked
// per call: the backend is fixed per process, but the tests switch it (blas::set_backend).
bool blas_avx512() {
  if (blas::active_backend() == blas::Backend::xgrad) return blas::own_gemm_isa() == Isa::avx512;
  static const bool yes = blas::core_isa(blas::core_name()).isa == Isa::avx512;
  return yes;
}

template <class T>
constexpr std::int64_t tile_width() {
  return kTileVecs * simd::lanes<T, Arch>;
}

// True when n (a group's or block's width) is kTileMinGroup..kTileMaxGroup and a multiple of the tile
// width, or up to kTileMaxGroup512 for the AVX-512 tiles.
template <class T>
bool tile_dim(std::int64_t n) {
  if (n < kTileMinGroup || n % tile_width<T>() != 0) return false;
  return n <= kTileMaxGroup || (simd512<T>() && bsl512::tile_width_ok(n) &&
                                n <= (blas_avx512() ? kTileMaxGroup512Blas512 : kTileMaxGroup512));
}

// True when every group fits the tile kernels (tile_dim).
template <class T>
bool tile_groups(const std::vector<BlockCsr::Group>& groups) {
  for (const auto& g : groups)
    if (!tile_dim<T>(g.size)) return false;
  return !groups.empty();
}

// The row tiles of 1 to kTileRows rows (bsl::row_tile, block_sparse_tiles.hpp), kTileVecs vectors wide.
template <class T>
constexpr bsl::RowTileFn<T> kRowTiles[kTileRows] = {
    &bsl::row_tile<T, Arch, 1, kTileVecs>, &bsl::row_tile<T, Arch, 2, kTileVecs>,
    &bsl::row_tile<T, Arch, 3, kTileVecs>, &bsl::row_tile<T, Arch, 4, kTileVecs>,
    &bsl::row_tile<T, Arch, 5, kTileVecs>, &bsl::row_tile<T, Arch, 6, kTileVecs>};

// d[i * ldd + c] = bias[c] + the sweep of segs over rows i < mt of a (row stride lda), for c < width
// (a multiple of the tile width; bias may be null: zero). The segments are taken in chunks of about
// kTileChunkK inner indices, each chunk swept by every row tile and column chunk.
template <class T>
void tile_group(const T* a, std::int64_t lda, std::int64_t mt, const std::vector<TileSeg<T>>& segs, std::int64_t width,
                T* d, std::int64_t ldd, const T* bias) {
  const std::int64_t tw = tile_width<T>(), nseg = static_cast<std::int64_t>(segs.size());
  if constexpr (std::is_same_v<T, float>)
    if (const bsl512::Kernels* k512 = simd512<T>(); k512 && bsl512::tile_width_ok(width)) {
      // The same chunk bytes of coefficients for wider groups (the chunks do not change the sums).
      k512->tile_group(a, lda, mt, segs.data(), nseg, width, d, ldd, bias,
                       kTileChunkK * kTileMaxGroup / std::max(kTileMaxGroup, width));
      return;
    }
  bsl::tile_sweep(a, lda, mt, segs.data(), nseg, width, d, ldd, bias, kTileChunkK, tw, kTileRows, kRowTiles<T>);
}

template <class T>
void tile_forward(const BlockCsr& p, const T* x, std::int64_t m, const T* w, const T* b, T* y) {
  const std::int64_t in = p.in, out = p.out;
  const auto& blocks = p.blocks;
  const auto& groups = p.row_groups;
  const auto& ptr = p.row_ptr;
  const std::int64_t ngroups = static_cast<std::int64_t>(groups.size());
  run_tasks(num_tiles(m) * ngroups, double(m) * double(p.stored), [&](std::int64_t t) {
    const std::int64_t r = t % ngroups, m0 = (t / ngroups) * kBatchTile, mt = std::min(kBatchTile, m - m0);
    const auto& grp = groups[static_cast<std::size_t>(r)];
    const std::int64_t k0 = ptr[static_cast<std::size_t>(r)], k1 = ptr[static_cast<std::size_t>(r) + 1];
    // The group's blocks transposed (Wt_B[j, o]) back to back, so an inner index's outputs are contiguous.
    std::int64_t kk = 0;
    for (std::int64_t k = k0; k < k1; ++k) kk += blocks[static_cast<std::size_t>(k)].cols;
    T* wt = scratch<T>(0, std::max<std::int64_t>(1, kk * grp.size));
    std::vector<TileSeg<T>> segs;
    segs.reserve(static_cast<std::size_t>(k1 - k0));
    for (std::int64_t k = k0; k < k1; ++k) {
      const auto& bl = blocks[static_cast<std::size_t>(k)];
      transpose_block(w + bl.offset, bl.rows, bl.cols, bl.cols, wt, bl.rows, static_cast<const T*>(nullptr));
      segs.push_back({bl.col, bl.cols, wt, bl.rows});
      wt += bl.cols * bl.rows;
    }
    tile_group(x + m0 * in, in, mt, segs, grp.size, y + m0 * out + grp.begin, out, b ? b + grp.begin : nullptr);
  });
}

template <class T>
void tile_input_grad(const BlockCsr& p, const T* g, std::int64_t m, const T* w, T* dx) {
  const std::int64_t in = p.in, out = p.out;
  const auto& blocks = p.blocks;
  const auto& groups = p.col_groups;
  const auto& ptr = p.col_ptr;
  const auto& index = p.col_index;
  const std::int64_t ngroups = static_cast<std::int64_t>(groups.size());
  run_tasks(num_tiles(m) * ngroups, double(m) * double(p.stored), [&](std::int64_t t) {
    const std::int64_t c = t % ngroups, m0 = (t / ngroups) * kBatchTile, mt = std::min(kBatchTile, m - m0);
    const auto& grp = groups[static_cast<std::size_t>(c)];
    std::vector<TileSeg<T>> segs;
    segs.reserve(static_cast<std::size_t>(ptr[static_cast<std::size_t>(c) + 1] - ptr[static_cast<std::size_t>(c)]));
    for (std::int64_t k = ptr[static_cast<std::size_t>(c)]; k < ptr[static_cast<std::size_t>(c) + 1]; ++k) {
      const auto& bl = blocks[static_cast<std::size_t>(index[static_cast<std::size_t>(k)])];
      segs.push_back({bl.row, bl.rows, w + bl.offset, bl.cols});
    }
    tile_group(g + m0 * out, out, mt, segs, grp.size, dx + m0 * in + grp.begin, in, static_cast<const T*>(nullptr));
  });
}

// dst + rows * begin_g: the (rows x size_g) panel src[:, begin_g : begin_g + size_g] for every group g
// with used[g] (src is rows x n, row-major). Tasks over groups.
template <class T>
void group_panels(const T* src, std::int64_t rows, std::int64_t n, const std::vector<BlockCsr::Group>& groups,
                  const std::vector<char>& used, T* dst) {
  run_tasks(static_cast<std::int64_t>(groups.size()), double(rows) * double(n) / 8, [&](std::int64_t t) {
    if (!used[static_cast<std::size_t>(t)]) return;
    const auto& grp = groups[static_cast<std::size_t>(t)];
    T* d = dst + rows * grp.begin;
    constexpr int L = simd::lanes<T, Arch>;
    const std::int64_t nv = grp.size / L;  // tile groups are whole vectors wide
    for (std::int64_t i = 0; i < rows; ++i) {
      const T* sr = src + i * n + grp.begin;
      T* dr = d + i * grp.size;
      for (std::int64_t v = 0; v < nv; ++v) store_v(dr + v * L, load_v(sr + v * L));
    }
  });
}

template <class T>
inline void outer_tile_n(int nr, const T* gp, std::int64_t ldg, const T* xp, std::int64_t ldx, std::int64_t mc, T* out,
                         std::int64_t ldo, bool accumulate) {
  static_assert(kTileRows == 6);
  switch (nr) {
    case 6:
      return bsl::outer_tile<T, Arch, 6, kTileVecs>(gp, ldg, xp, ldx, mc, out, ldo, accumulate);
    case 5:
      return bsl::outer_tile<T, Arch, 5, kTileVecs>(gp, ldg, xp, ldx, mc, out, ldo, accumulate);
    case 4:
      return bsl::outer_tile<T, Arch, 4, kTileVecs>(gp, ldg, xp, ldx, mc, out, ldo, accumulate);
    case 3:
      return bsl::outer_tile<T, Arch, 3, kTileVecs>(gp, ldg, xp, ldx, mc, out, ldo, accumulate);
    case 2:
      return bsl::outer_tile<T, Arch, 2, kTileVecs>(gp, ldg, xp, ldx, mc, out, ldo, accumulate);
    default:
      return bsl::outer_tile<T, Arch, 1, kTileVecs>(gp, ldg, xp, ldx, mc, out, ldo, accumulate);
  }
}

// True when the weight-gradient tiles fit every block: rows and columns fit tile_dim (rows are whole
// vectors, as the panel copy needs).
template <class T>
bool tile_blocks(const BlockCsr& p) {
  for (const auto& bl : p.blocks)
    if (!tile_dim<T>(bl.rows) || !tile_dim<T>(bl.cols)) return false;
  if (static_cast<std::int64_t>(p.blocks.size()) == 0) return false;
  std::int64_t widest = 0, used_cols = 0;
  for (const auto& bl : p.blocks) widest = std::max({widest, bl.rows, bl.cols});
  for (std::size_t c = 0; c + 1 < p.col_ptr.size(); ++c) used_cols += p.col_ptr[c + 1] > p.col_ptr[c];
  // The AVX-512 tiles beat the GEMM path even without reuse (measured, 64x64 and 128x128 at density 1/64).
  return widest <= 32 || simd512<T>() ||
         double(static_cast<std::int64_t>(p.blocks.size())) >= kTileWideMinReuse * double(used_cols);
}

template <class T>
void tile_weight_grad(const BlockCsr& p, const T* g, const T* x, std::int64_t m, T* dw) {
  const std::int64_t in = p.in, out = p.out, tw = tile_width<T>();
  const auto& blocks = p.blocks;
  // AVX-512 tiles on every block: read g and x in place (Note [Tile kernels], weight gradient).
  if constexpr (std::is_same_v<T, float>)
    if (const bsl512::Kernels* k512 = simd512<T>();
        k512 &&
        std::all_of(blocks.begin(), blocks.end(), [](const auto& bl) { return bsl512::tile_width_ok(bl.cols); })) {
      constexpr std::int64_t kRun = 4;  // blocks per task, as below
      const std::int64_t nb = static_cast<std::int64_t>(p.blocks.size()), ntasks = (nb + kRun - 1) / kRun;
      run_tasks(ntasks, double(m) * double(p.stored), [&](std::int64_t t) {
        for (std::int64_t k = t * kRun; k < std::min(nb, (t + 1) * kRun); ++k) {
          const auto& bl = blocks[static_cast<std::size_t>(k)];
          k512->outer_block(g + bl.row, out, x + bl.col, in, m, bl.rows, bl.cols, kWeightBatchChunk, dw + bl.offset);
        }
      });
      return;
    }
  std::vector<char> row_used(p.row_groups.size(), 0), col_used(p.col_groups.size(), 0);
  for (const auto& bl : blocks) {
    row_used[static_cast<std::size_t>(bl.row_group)] = 1;
    col_used[static_cast<std::size_t>(bl.col_group)] = 1;
  }
  CallPanel<T> gc_panel(0, m * out), xc_panel(1, m * in);
  T* gc = gc_panel.data();
  T* xc = xc_panel.data();
  group_panels(g, m, out, p.row_groups, row_used, gc);
  group_panels(x, m, in, p.col_groups, col_used, xc);
  // Tasks: runs of kTileWeightRun consecutive blocks.
  constexpr std::int64_t kTileWeightRun = 4;
  const std::int64_t nb = static_cast<std::int64_t>(p.blocks.size()),
                     ntasks = (nb + kTileWeightRun - 1) / kTileWeightRun;
  const bsl512::Kernels* k512 = simd512<T>();
  run_tasks(ntasks, double(m) * double(p.stored), [&](std::int64_t t) {
    for (std::int64_t k = t * kTileWeightRun; k < std::min(nb, (t + 1) * kTileWeightRun); ++k) {
      const auto& bl = blocks[static_cast<std::size_t>(k)];
      const T* gb = gc + m * bl.row;
      const T* xb = xc + m * bl.col;
      T* d = dw + bl.offset;
      const std::int64_t chunk =
          std::max<std::int64_t>(8, kTileChunkBytes / (static_cast<std::int64_t>(sizeof(T)) * (bl.rows + bl.cols)));
      if constexpr (std::is_same_v<T, float>)
        if (k512 && bsl512::tile_width_ok(bl.cols)) {
          k512->outer_block(gb, bl.rows, xb, bl.cols, m, bl.rows, bl.cols, chunk, d);
          continue;
        }
      for (std::int64_t m0 = 0; m0 < m; m0 += chunk) {
        const std::int64_t mc = std::min(chunk, m - m0);
        for (std::int64_t o = 0, nr = 0; o < bl.rows; o += nr) {
          // Tiles of 6 rows; 8 rows left go as 4 + 4 (32 = 6 * 4 + 4 + 4): a 2-row tile has too few
          // accumulators to hide the FMA latency.
          nr = bl.rows - o == 8 ? 4 : std::min<std::int64_t>(kTileRows, bl.rows - o);
          for (std::int64_t c = 0; c < bl.cols; c += tw)
            outer_tile_n<T>(static_cast<int>(nr), gb + m0 * bl.rows + o, bl.rows, xb + m0 * bl.cols + c, bl.cols, mc,
                            d + o * bl.cols + c, bl.cols, m0 > 0);
        }
      }
    }
  });
}

}  // namespace

template <class T>
void bsl_forward(const BlockCsr& p, const T* x, std::int64_t m, const T* w, const T* b, T* y) {
  const std::int64_t in = p.in, out = p.out;
  const auto& blocks = p.blocks;
  const auto& groups = p.row_groups;
  const auto& ptr = p.row_ptr;
  const std::int64_t tiles = num_tiles(m), ngroups = static_cast<std::int64_t>(groups.size());
  if (lane_groups(groups)) {
    lane_forward(p, x, m, w, b, y);
    return;
  }
  if (tile_groups<T>(groups)) {
    tile_forward(p, x, m, w, b, y);
    return;
  }
  run_tasks(tiles * ngroups, double(m) * double(p.stored), [&](std::int64_t t) {
    const std::int64_t r = t % ngroups, m0 = (t / ngroups) * kBatchTile, mt = std::min(kBatchTile, m - m0);
    const std::int64_t row = groups[r].begin, rows = groups[r].size;
    T* yt = y + m0 * out + row;
    for (std::int64_t i = 0; i < mt; ++i) {
      T* yr = yt + i * out;
      if (b)
        std::memcpy(yr, b + row, sizeof(T) * rows);
      else
        std::fill(yr, yr + rows, T(0));
    }
    const std::int64_t k0 = ptr[r], k1 = ptr[r + 1];
    if (k1 == k0) return;
    const T* xt = x + m0 * in;
    if (k1 - k0 == 1) {
      const auto& bl = blocks[k0];
      gemm(false, true, mt, rows, bl.cols, xt + bl.col, in, w + bl.offset, bl.cols, T(1), yt, out);
      return;
    }
    // Several blocks: gather their input columns into one (mt x K) panel and their weights into one
    // (rows x K) panel, so a single GEMM runs with the long inner dimension K.
    std::int64_t kk = 0;
    for (std::int64_t k = k0; k < k1; ++k) kk += blocks[k].cols;
    T* xg = scratch<T>(0, mt * kk);
    T* wg = scratch<T>(1, rows * kk);
    for (std::int64_t i = 0; i < mt; ++i) {
      T* dst = xg + i * kk;
      const T* src = xt + i * in;
      for (std::int64_t k = k0; k < k1; ++k) {
        copy_segment(src + blocks[k].col, blocks[k].cols, dst);
        dst += blocks[k].cols;
      }
    }
    std::int64_t c = 0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const auto& bl = blocks[k];
      for (std::int64_t i = 0; i < rows; ++i) copy_segment(w + bl.offset + i * bl.cols, bl.cols, wg + i * kk + c);
      c += bl.cols;
    }
    gemm(false, true, mt, rows, kk, xg, kk, wg, kk, T(1), yt, out);
  });
}

template <class T>
void bsl_input_grad(const BlockCsr& p, const T* g, std::int64_t m, const T* w, T* dx) {
  const std::int64_t in = p.in, out = p.out;
  const auto& blocks = p.blocks;
  const auto& groups = p.col_groups;
  const auto& ptr = p.col_ptr;
  const auto& index = p.col_index;
  const std::int64_t tiles = num_tiles(m), ngroups = static_cast<std::int64_t>(groups.size());
  if (lane_groups(groups)) {
    lane_input_grad(p, g, m, w, dx);
    return;
  }
  if (tile_groups<T>(groups)) {
    tile_input_grad(p, g, m, w, dx);
    return;
  }
  run_tasks(tiles * ngroups, double(m) * double(p.stored), [&](std::int64_t t) {
    const std::int64_t c = t % ngroups, m0 = (t / ngroups) * kBatchTile, mt = std::min(kBatchTile, m - m0);
    const std::int64_t col = groups[c].begin, cols = groups[c].size;
    T* dxt = dx + m0 * in + col;
    const T* gt = g + m0 * out;
    const std::int64_t k0 = ptr[c], k1 = ptr[c + 1];
    if (k1 == k0) {
      for (std::int64_t i = 0; i < mt; ++i) std::fill(dxt + i * in, dxt + i * in + cols, T(0));
      return;
    }
    if (k1 - k0 == 1) {
      const auto& bl = blocks[index[k0]];
      gemm(false, false, mt, cols, bl.rows, gt + bl.row, out, w + bl.offset, cols, T(0), dxt, in);
      return;
    }
    // Gather G's columns of every block of this column group into (mt x K) and stack the blocks
    // (each rows x cols, contiguous) into (K x cols): one GEMM sums them in row-group order.
    std::int64_t kk = 0;
    for (std::int64_t k = k0; k < k1; ++k) kk += blocks[index[k]].rows;
    T* gg = scratch<T>(0, mt * kk);
    T* wg = scratch<T>(1, kk * cols);
    for (std::int64_t i = 0; i < mt; ++i) {
      T* dst = gg + i * kk;
      const T* src = gt + i * out;
      for (std::int64_t k = k0; k < k1; ++k) {
        const auto& bl = blocks[index[k]];
        copy_segment(src + bl.row, bl.rows, dst);
        dst += bl.rows;
      }
    }
    std::int64_t r = 0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const auto& bl = blocks[index[k]];
      std::memcpy(wg + r * cols, w + bl.offset, sizeof(T) * bl.rows * cols);
      r += bl.rows;
    }
    gemm(false, false, mt, cols, kk, gg, kk, wg, cols, T(0), dxt, in);
  });
}

template <class T>
void bsl_weight_grad(const BlockCsr& p, const T* g, const T* x, std::int64_t m, T* dw) {
  const std::int64_t in = p.in, out = p.out;
  const auto& blocks = p.blocks;
  const auto& ptr = p.row_ptr;
  if (m > 0 && lane_groups(p.row_groups) && lane_groups(p.col_groups)) {
    lane_weight_grad(p, g, x, m, dw);
    return;
  }
  if (m > 0 && tile_blocks<T>(p)) {
    tile_weight_grad(p, g, x, m, dw);
    return;
  }
  // Tasks: runs of consecutive blocks of one row group, at most kWeightPanelCols gathered columns each.
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;
  for (std::size_t r = 0; r + 1 < ptr.size(); ++r) {
    std::int64_t start = ptr[r], cols = 0;
    for (std::int64_t k = ptr[r]; k < ptr[r + 1]; ++k) {
      if (k > start && cols + blocks[k].cols > kWeightPanelCols) {
        runs.emplace_back(start, k);
        start = k;
        cols = 0;
      }
      cols += blocks[k].cols;
    }
    if (ptr[r + 1] > start) runs.emplace_back(start, ptr[r + 1]);
  }
  run_tasks(static_cast<std::int64_t>(runs.size()), double(m) * double(p.stored), [&](std::int64_t t) {
    const auto [k0, k1] = runs[static_cast<std::size_t>(t)];
    const std::int64_t row = blocks[k0].row, rows = blocks[k0].rows;
    if (m == 0) {
      for (std::int64_t k = k0; k < k1; ++k)
        std::fill(dw + blocks[k].offset, dw + blocks[k].offset + rows * blocks[k].cols, T(0));
      return;
    }
    if (k1 - k0 == 1) {
      const auto& bl = blocks[k0];
      gemm(true, false, rows, bl.cols, m, g + row, out, x + bl.col, in, T(0), dw + bl.offset, bl.cols);
      return;
    }
    // Gather x's columns of the run into (mc x K), accumulate (rows x K) over fixed batch chunks,
    // then scatter the panel back into the blocks.
    std::int64_t kk = 0;
    for (std::int64_t k = k0; k < k1; ++k) kk += blocks[k].cols;
    const std::int64_t mc_max = std::min(m, kWeightBatchChunk);
    T* xg = scratch<T>(0, mc_max * kk);
    T* acc = scratch<T>(1, rows * kk);
    for (std::int64_t m0 = 0; m0 < m; m0 += kWeightBatchChunk) {
      const std::int64_t mc = std::min(kWeightBatchChunk, m - m0);
      for (std::int64_t i = 0; i < mc; ++i) {
        T* dst = xg + i * kk;
        const T* src = x + (m0 + i) * in;
        for (std::int64_t k = k0; k < k1; ++k) {
          copy_segment(src + blocks[k].col, blocks[k].cols, dst);
          dst += blocks[k].cols;
        }
      }
      gemm(true, false, rows, kk, mc, g + m0 * out + row, out, xg, kk, m0 == 0 ? T(0) : T(1), acc, kk);
    }
    std::int64_t c = 0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const auto& bl = blocks[k];
      for (std::int64_t i = 0; i < rows; ++i) copy_segment(acc + i * kk + c, bl.cols, dw + bl.offset + i * bl.cols);
      c += bl.cols;
    }
  });
}

template <class T>
void bsl_bias_grad(const T* g, std::int64_t m, std::int64_t n, T* db) {
  constexpr std::int64_t kCols = 256;
  const std::int64_t chunks = (n + kCols - 1) / kCols;
  run_tasks(chunks, double(m) * double(n) / 8, [&](std::int64_t t) {
    const std::int64_t j0 = t * kCols, j1 = std::min(n, j0 + kCols);
    std::fill(db + j0, db + j1, T(0));
    for (std::int64_t i = 0; i < m; ++i) {
      const T* gr = g + i * n;
      for (std::int64_t j = j0; j < j1; ++j) db[j] += gr[j];
    }
  });
}

template <class T>
void bsl_grad_block_norms(const T* x, const T* g, std::int64_t m, std::int64_t in, std::int64_t out, std::int64_t bi,
                          std::int64_t bo, T* norms) {
  const std::int64_t nr = out / bo, nc = in / bi;
  if (nc == 0) return;  // no block (and no panel: BLAS needs a leading dimension >= 1)
  run_tasks(nr, double(m) * double(in) * double(out), [&](std::int64_t r) {
    T* acc = scratch<T>(0, bo * in);
    if (m == 0) std::fill(acc, acc + bo * in, T(0));
    for (std::int64_t m0 = 0; m0 < m; m0 += kWeightBatchChunk) {
      const std::int64_t mc = std::min(kWeightBatchChunk, m - m0);
      gemm(true, false, bo, in, mc, g + m0 * out + r * bo, out, x + m0 * in, in, m0 == 0 ? T(0) : T(1), acc, in);
    }
    for (std::int64_t c = 0; c < nc; ++c) {
      double s = 0;
      for (std::int64_t i = 0; i < bo; ++i)
        for (std::int64_t j = c * bi; j < (c + 1) * bi; ++j) s += double(acc[i * in + j]) * double(acc[i * in + j]);
      norms[r * nc + c] = static_cast<T>(std::sqrt(s));
    }
  });
}

template <class T>
void bsl_remap(const BlockCsr& from, const T* w, const BlockCsr& to, const std::int64_t* src_block, T* dst) {
  run_tasks(static_cast<std::int64_t>(to.blocks.size()), double(to.stored), [&](std::int64_t k) {
    const auto& b = to.blocks[static_cast<std::size_t>(k)];
    const std::int64_t n = b.rows * b.cols;
    if (src_block[k] < 0)
      std::fill(dst + b.offset, dst + b.offset + n, T(0));
    else
      std::memcpy(dst + b.offset, w + from.blocks[static_cast<std::size_t>(src_block[k])].offset, sizeof(T) * n);
  });
}

XGRAD_INSTANTIATE_FLOATING(bsl_grad_block_norms);
XGRAD_INSTANTIATE_FLOATING(bsl_remap);
XGRAD_INSTANTIATE_FLOATING(bsl_forward);
XGRAD_INSTANTIATE_FLOATING(bsl_input_grad);
XGRAD_INSTANTIATE_FLOATING(bsl_weight_grad);
XGRAD_INSTANTIATE_FLOATING(bsl_bias_grad);

}  // namespace xgrad::detail
