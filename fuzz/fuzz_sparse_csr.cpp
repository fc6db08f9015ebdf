// libFuzzer harness for the sparse matrix constructors (ops/sparse.hpp): sparse_csr_tensor,
// sparse_coo_tensor and the cached transpose. The input is read as
//   byte 0        the constructor: even = sparse_csr_tensor (bit 1: int32 indices), odd = sparse_coo_tensor
//   bytes 1..8    rows and cols, two signed 32-bit little-endian numbers (negative and huge ones too)
//   then          16-bit signed little-endian indices: for CSR the row offsets (up to rows + 1 of them,
//                 fewer when the input ends) and the columns after them; for COO (row, column) pairs
// Any input must either give a matrix or throw xgrad::Error. A matrix must then satisfy its
// invariants (offsets from 0 to nnz, columns in range and increasing within a row), its transposed
// pattern must be the stable sort of the entries by column (up to 2^20 columns), and for small
// matrices to_dense() must hold each entry's value (COO: the sum of its duplicates) and zeros
// elsewhere.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "xgrad/core/error.hpp"
#include "xgrad/ops/sparse.hpp"

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_sparse_csr: %s\n", what);
  std::abort();
}

template <class T>
xgrad::Tensor vec(const std::vector<T>& v, xgrad::Shape shape) {
  return xgrad::Tensor::from_data<T>(std::span<const T>(v), shape);
}

void check(const xgrad::SparseCsr& a, const std::map<std::pair<std::int64_t, std::int64_t>, double>& want) {
  const auto crow = a.pattern().crow();
  const auto col = a.pattern().col();
  if (static_cast<std::int64_t>(crow.size()) != a.rows() + 1 || crow.front() != 0 || crow.back() != a.nnz())
    fail("row offsets do not run from 0 to nnz");
  for (std::int64_t i = 0; i < a.rows(); ++i)
    for (std::int64_t k = crow[static_cast<std::size_t>(i)]; k < crow[static_cast<std::size_t>(i) + 1]; ++k) {
      const std::int64_t c = col[static_cast<std::size_t>(k)];
      if (c < 0 || c >= a.cols()) fail("a column out of range");
      if (k > crow[static_cast<std::size_t>(i)] && c <= col[static_cast<std::size_t>(k) - 1])
        fail("columns not increasing within a row");
    }
  // The transpose's offsets take cols + 1 entries: above 2^20 columns that only measures the allocator.
  if (a.cols() > (1 << 20)) return;
  const auto& t = a.pattern().transposed();
  if (static_cast<std::int64_t>(t.perm().size()) != a.nnz()) fail("the transpose has the wrong size");
  for (std::int64_t c = 0; c < a.cols(); ++c)
    for (std::int64_t k = t.crow()[static_cast<std::size_t>(c)]; k < t.crow()[static_cast<std::size_t>(c) + 1]; ++k) {
      const std::int64_t e = t.perm()[static_cast<std::size_t>(k)];
      if (col[static_cast<std::size_t>(e)] != c) fail("the transpose puts an entry in the wrong column");
      if (k > t.crow()[static_cast<std::size_t>(c)] && e <= t.perm()[static_cast<std::size_t>(k) - 1])
        fail("the transpose is not stable");
    }
  if (a.rows() * a.cols() > 4096) return;
  const xgrad::Tensor d = a.to_dense();
  const std::vector<double> dense = d.to_vector();
  for (std::int64_t i = 0; i < a.rows(); ++i)
    for (std::int64_t j = 0; j < a.cols(); ++j) {
      const auto it = want.find({i, j});
      const double expected = it == want.end() ? 0.0 : it->second;
      if (dense[static_cast<std::size_t>(i * a.cols() + j)] != expected) fail("to_dense() differs from the entries");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 9) return 0;
  const std::uint8_t mode = data[0];
  std::int32_t rows32 = 0, cols32 = 0;
  std::memcpy(&rows32, data + 1, 4);
  std::memcpy(&cols32, data + 5, 4);
  std::vector<std::int64_t> nums;
  for (std::size_t p = 9; p + 1 < size; p += 2) {
    std::int16_t v = 0;
    std::memcpy(&v, data + p, 2);
    nums.push_back(v);
  }
  const std::int64_t rows = rows32, cols = cols32;
  std::map<std::pair<std::int64_t, std::int64_t>, double> want;
  try {
    if (mode % 2 == 0) {  // CSR arrays as given
      const std::size_t n_crow = rows >= 0 && static_cast<std::uint64_t>(rows) < nums.size() ? rows + 1 : nums.size();
      std::vector<std::int64_t> crow(nums.begin(), nums.begin() + static_cast<std::ptrdiff_t>(n_crow));
      std::vector<std::int64_t> col(nums.begin() + static_cast<std::ptrdiff_t>(n_crow), nums.end());
      std::vector<double> values(col.size());
      for (std::size_t k = 0; k < values.size(); ++k) values[k] = static_cast<double>(k + 1);
      const auto n = static_cast<std::int64_t>(col.size());
      xgrad::Tensor crow_t, col_t;
      if (mode & 2) {
        crow_t = vec(std::vector<std::int32_t>(crow.begin(), crow.end()), {static_cast<std::int64_t>(crow.size())});
        col_t = vec(std::vector<std::int32_t>(col.begin(), col.end()), {n});
      } else {
        crow_t = vec(crow, {static_cast<std::int64_t>(crow.size())});
        col_t = vec(col, {n});
      }
      const xgrad::SparseCsr a = xgrad::sparse_csr_tensor(crow_t, col_t, vec(values, {n}), {rows, cols});
      for (std::int64_t i = 0; i < a.rows(); ++i)
        for (std::int64_t k = crow[static_cast<std::size_t>(i)]; k < crow[static_cast<std::size_t>(i) + 1]; ++k)
          want[{i, col[static_cast<std::size_t>(k)]}] = values[static_cast<std::size_t>(k)];
      check(a, want);
    } else {  // COO pairs; sizes above 2^20 would only measure the allocator (rows + 1 offsets)
      if (rows > (1 << 20) || cols > (1 << 20)) return 0;
      const std::size_t n = nums.size() / 2;
      std::vector<std::int64_t> idx(2 * n);
      std::vector<double> values(n);
      for (std::size_t k = 0; k < n; ++k) {
        idx[k] = nums[2 * k];
        idx[n + k] = nums[2 * k + 1];
        values[k] = static_cast<double>(k % 7) - 3.0;  // duplicates may cancel: an explicit zero stays stored
        want[{nums[2 * k], nums[2 * k + 1]}] += values[k];
      }
      const auto nn = static_cast<std::int64_t>(n);
      const xgrad::SparseCsr a = xgrad::sparse_coo_tensor(vec(idx, {2, nn}), vec(values, {nn}), {rows, cols});
      if (a.nnz() != static_cast<std::int64_t>(want.size())) fail("COO: nnz is not the number of distinct entries");
      check(a, want);
    }
  } catch (const xgrad::Error&) {
  }
  return 0;
}
