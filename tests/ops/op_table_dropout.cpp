// The op table's entries for ops/dropout.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of dropout.hpp.
void add_dropout_entries(std::vector<OpInfo>& t) {
  const std::size_t first = t.size();
  {
    // dropout (ops/dropout.hpp): every call draws from a generator seeded alike, so the mask is fixed
    // and the op is linear in x. The reference recomputes the mask from Philox4x32-10 in numpy with
    // the layout of Note [Counter-based random numbers]: element 64g + 16k + l is dropped when word
    // k of block 16g + l is below p * 2^32.
    const std::string philox_mask =
        "import numpy as np\n"
        "def philox_words(key, blocks):\n"
        "    M = np.uint64(0xffffffff)\n"
        "    c = np.arange(blocks, dtype=np.uint64)\n"
        "    c0, c1 = c & M, c >> np.uint64(32)\n"
        "    c2, c3 = np.zeros(blocks, np.uint64), np.zeros(blocks, np.uint64)\n"
        "    k0, k1 = np.uint64(key & 0xffffffff), np.uint64(key >> 32)\n"
        "    for _ in range(10):\n"
        "        p0, p1 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2\n"
        "        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0) & M, p1 & M, "
        "((p0 >> np.uint64(32)) ^ c3 ^ k1) & M, p0 & M\n"
        "        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & M, (k1 + np.uint64(0xBB67AE85)) & M\n"
        "    return np.stack([c0, c1, c2, c3])\n"
        "n = a.numel()\n"
        "w = philox_words(1234, (n + 63) // 64 * 16)\n"
        "i = np.arange(n)\n"
        "word = w[(i % 64) // 16, 16 * (i // 64) + i % 16]\n"
        "keep = torch.from_numpy((word >= np.uint64(int(np.ldexp(0.3, 32)))).reshape(tuple(a.shape)))\n"
        "out = a * torch.where(keep, torch.tensor(1 / 0.7, dtype=a.dtype), torch.tensor(0.0, dtype=a.dtype))\n";
    OpInfo op = unary("dropout", "dropout(Tensor,double,bool,Generator)", philox_mask, [](auto& x) {
      Generator g(1234);
      return dropout(x, 0.3, true, g);
    });
    op.errors = {{"p above 1",
                  [] {
                    dropout(Tensor::zeros({2, 3}, kFloat64), 1.5, true);
                  },
                  {"dropout", "'p'", "1.5"}},
                 {"NaN p",
                  [] {
                    dropout(Tensor::zeros({2, 3}, kFloat64), NAN, true);
                  },
                  {"dropout", "'p'", "nan"}}};
    t.push_back(op);
  }
  add_integer_input_errors(t, first);
}

const bool registered = register_entries(__FILE__, add_dropout_entries);

}  // namespace xgrad::test::table
