// The op table's entries for ops/pool.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of pool.hpp.
void add_pool_entries(std::vector<OpInfo>& t) {
  {
    // pooling: x (n, c, [h,] w)
    struct PoolCase {
      std::string name, fn, torch;
      int dims;
      bool max, adaptive, unbatched;
      std::vector<std::int64_t> k, stride, padding, dilation;  // adaptive: k = output size
      bool ceil, include_pad;
      std::optional<std::int64_t> divisor;
    };
    const std::vector<PoolCase> pools = {
        {"max_pool1d",
         "max_pool1d",
         "max_pool1d(x, 3, 2, 1, 2, ceil_mode=True)",
         1,
         true,
         false,
         false,
         {3},
         {2},
         {1},
         {2},
         true,
         true,
         {}},
        {"max_pool2d",
         "max_pool2d",
         "max_pool2d(x, (3, 2), (2, 1), (1, 0), (1, 2))",
         2,
         true,
         false,
         false,
         {3, 2},
         {2, 1},
         {1, 0},
         {1, 2},
         false,
         true,
         {}},
        {"max_pool2d_default_stride_unbatched",
         "max_pool2d",
         "max_pool2d(x, 2, ceil_mode=True)",
         2,
         true,
         false,
         true,
         {2},
         {},
         {0},
         {1},
         true,
         true,
         {}},
        {"avg_pool1d",
         "avg_pool1d",
         "avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)",
         1,
         false,
         false,
         false,
         {3},
         {2},
         {1},
         {1},
         true,
         false,
         {}},
        {"avg_pool2d",
         "avg_pool2d",
         "avg_pool2d(x, 3, 2, 1, ceil_mode=True)",
         2,
         false,
         false,
         false,
         {3},
         {2},
         {1},
         {1},
         true,
         true,
         {}},
        {"avg_pool2d_divisor_override",
         "avg_pool2d",
         "avg_pool2d(x, (2, 3), (1, 2), (1, 1), divisor_override=5)",
         2,
         false,
         false,
         false,
         {2, 3},
         {1, 2},
         {1, 1},
         {1},
         false,
         true,
         5},
        {"adaptive_avg_pool1d",
         "adaptive_avg_pool1d",
         "adaptive_avg_pool1d(x, 3)",
         1,
         false,
         true,
         false,
         {3},
         {},
         {},
         {},
         false,
         false,
         {}},
        {"adaptive_avg_pool2d",
         "adaptive_avg_pool2d",
         "adaptive_avg_pool2d(x, (3, 2))",
         2,
         false,
         true,
         false,
         {3, 2},
         {},
         {},
         {},
         false,
         false,
         {}},
        {"adaptive_max_pool2d",
         "adaptive_max_pool2d",
         "adaptive_max_pool2d(x, (2, 4))",
         2,
         true,
         true,
         true,
         {2, 4},
         {},
         {},
         {},
         false,
         false,
         {}},
    };
    for (const PoolCase& pc : pools) {
      OpInfo op;
      op.name = pc.name;
      const std::string V = "vector<int64_t>";
      op.signature = pc.adaptive    ? pc.fn + "(Tensor," + V + ")"
                     : pc.max       ? pc.fn + "(Tensor," + V + "," + V + "," + V + "," + V + ",bool)"
                     : pc.dims == 1 ? pc.fn + "(Tensor," + V + "," + V + "," + V + ",bool,bool)"
                                    : pc.fn + "(Tensor," + V + "," + V + "," + V + ",bool,bool,optional<int64_t>)";
      op.torch = "out = torch.nn.functional." + pc.torch;
      op.call = [pc](const Tensors& in) -> Tensor {
        if (pc.adaptive)
          return pc.fn == "adaptive_avg_pool1d"   ? adaptive_avg_pool1d(in[0], pc.k)
                 : pc.fn == "adaptive_avg_pool2d" ? adaptive_avg_pool2d(in[0], pc.k)
                                                  : adaptive_max_pool2d(in[0], pc.k);
        if (pc.max)
          return (pc.dims == 1 ? max_pool1d : max_pool2d)(in[0], pc.k, pc.stride, pc.padding, pc.dilation, pc.ceil);
        if (pc.dims == 1) return avg_pool1d(in[0], pc.k, pc.stride, pc.padding, pc.ceil, pc.include_pad);
        return avg_pool2d(in[0], pc.k, pc.stride, pc.padding, pc.ceil, pc.include_pad, pc.divisor);
      };
      op.sample = [pc](Dtype dt, const SampleSpec& s, Generator& g) {
        Shape xs = {s.sizes[0], s.sizes[1]};
        if (pc.unbatched) xs.erase(xs.begin());
        for (int d = 0; d < pc.dims; ++d) xs.push_back(s.sizes[static_cast<std::size_t>(2 + d)]);
        return SampleInput{{{"x", values(xs, g, dt)}}, {}, {}};
      };
      op.size_names = {"n", "c"};
      op.small = {2, 3};
      op.threads = {8, 8};
      op.large = {40, 40};
      for (int d = 0; d < pc.dims; ++d) {
        op.size_names.push_back(d == pc.dims - 1 ? "w" : "h");
        op.small.push_back(7 - d);
        op.threads.push_back(pc.dims == 1 ? 600 : 32);
        op.large.push_back(pc.dims == 1 ? 300 : 60);
      }
      if (pc.unbatched) op.threads[1] = 64;
      op.refuses = [pc](const SampleSpec& s) -> std::string {
        for (std::size_t i = pc.unbatched ? 1 : 1; i < s.sizes.size(); ++i)
          if (s.sizes[i] == 0) return "empty non-batch dimension";
        if (pc.adaptive) return "";
        for (int d = 0; d < pc.dims; ++d) {
          const auto i = static_cast<std::size_t>(d);
          auto pick = [&](const std::vector<std::int64_t>& v, std::int64_t dflt) {
            return v.empty() ? dflt : v.size() == 1 ? v[0] : v[i];
          };
          const std::int64_t k = pick(pc.k, 1), st = pick(pc.stride, k), p = pick(pc.padding, 0),
                             dl = pick(pc.dilation, 1), L = s.sizes[2 + i];
          const std::int64_t num = L + 2 * p - dl * (k - 1) - 1 + (pc.ceil ? st - 1 : 0);
          std::int64_t o = (num >= 0 ? num / st : -((-num + st - 1) / st)) + 1;
          if (pc.ceil && (o - 1) * st >= L + p) --o;
          if (o < 1) return "too small";
        }
        return "";
      };
      op.check_undefined = true;
      const std::string f = pc.fn;
      const Tensor x4 = Tensor::zeros({2, 3, 6, 6}, kFloat64), x3 = Tensor::zeros({2, 3, 6}, kFloat64);
      if (pc.name == "max_pool2d")
        op.errors = {{"kernel 0",
                      [x4] {
                        max_pool2d(x4, {0, 2});
                      },
                      {"max_pool2d", "'kernel_size'", "(0, 2)"}},
                     {"stride 0", [x4] { max_pool2d(x4, {2}, {0}); }, {"max_pool2d", "'stride'", "(0,)"}},
                     {"dilation 0", [x4] { max_pool2d(x4, {2}, {}, {0}, {0}); }, {"max_pool2d", "'dilation'", "(0,)"}},
                     {"padding over half the kernel",
                      [x4] { max_pool2d(x4, {2}, {}, {2}); },
                      {"max_pool2d", "'padding'", "(2,)"}},
                     {"kernel larger than the input",
                      [] {
                        max_pool2d(Tensor::zeros({1, 1, 2, 8}, kFloat64), {3});
                      },
                      {"max_pool2d", "(1, 1, 2, 8)", "too small"}},
                     {"empty channels",
                      [] {
                        max_pool2d(Tensor::zeros({2, 0, 4, 4}, kFloat64), {2});
                      },
                      {"max_pool2d", "(2, 0, 4, 4)"}},
                     {"x 2-d",
                      [] {
                        max_pool2d(Tensor::zeros({4, 4}, kFloat64), {2});
                      },
                      {"max_pool2d", "'x'", "(4, 4)"}},
                     {"three kernel sizes",
                      [x4] {
                        max_pool2d(x4, {2, 2, 2});
                      },
                      {"max_pool2d", "'kernel_size'", "(2, 2, 2)"}}};
      if (pc.name == "max_pool1d")
        op.errors = {
            {"x 4-d", [x4] { max_pool1d(x4, {2}); }, {"max_pool1d", "'x'", "(2, 3, 6, 6)"}},
            {"kernel larger than the input", [x3] { max_pool1d(x3, {7}); }, {"max_pool1d", "(2, 3, 6)", "too small"}}};
      if (pc.name == "avg_pool2d")
        op.errors = {
            {"divisor_override 0",
             [x4] { avg_pool2d(x4, {2}, {}, {0}, false, true, 0); },
             {"avg_pool2d", "'divisor_override'"}},
            {"negative padding", [x4] { avg_pool2d(x4, {2}, {}, {-1}); }, {"avg_pool2d", "'padding'", "(-1,)"}}};
      if (pc.name == "avg_pool1d")
        op.errors = {{"stride 0", [x3] { avg_pool1d(x3, {2}, {0}); }, {"avg_pool1d", "'stride'"}}};
      if (pc.name == "adaptive_avg_pool2d")
        op.errors = {{"negative output size",
                      [x4] {
                        adaptive_avg_pool2d(x4, {2, -1});
                      },
                      {"adaptive_avg_pool2d", "'output_size'", "(2, -1)"}},
                     {"empty height",
                      [] {
                        adaptive_avg_pool2d(Tensor::zeros({1, 2, 0, 3}, kFloat64), {2});
                      },
                      {"adaptive_avg_pool2d", "(1, 2, 0, 3)"}}};
      if (pc.name == "adaptive_avg_pool1d")
        op.errors = {{"x 1-d",
                      [] { adaptive_avg_pool1d(Tensor::zeros({5}, kFloat64), {2}); },
                      {"adaptive_avg_pool1d", "'x'", "(5,)"}}};
      if (pc.name == "adaptive_max_pool2d")
        op.errors = {{"three output sizes",
                      [x4] {
                        adaptive_max_pool2d(x4, {1, 2, 3});
                      },
                      {"adaptive_max_pool2d", "'output_size'"}}};
      t.push_back(op);
    }
    // max_pool*_with_indices: values and indices (as the input's dtype) in one flat output, so that
    // parity checks both and the gradient of the values.
    for (const int dims : {1, 2}) {
      OpInfo op;
      op.name = dims == 1 ? "max_pool1d_with_indices" : "max_pool2d_with_indices";
      const std::string V = "vector<int64_t>";
      op.signature = op.name + "(Tensor," + V + "," + V + "," + V + "," + V + ",bool)";
      op.torch =
          dims == 1 ? "v, i = torch.nn.functional.max_pool1d(x, 3, 2, 1, 1, ceil_mode=True, return_indices=True)\n"
                    : "v, i = torch.nn.functional.max_pool2d(x, (2, 3), (2, 1), (1, 1), (2, 1), return_indices=True)\n";
      op.torch += "out = torch.cat([v.flatten(), i.flatten().to(v.dtype)])";
      op.call = [dims](const Tensors& in) {
        const Tensors r = dims == 1 ? max_pool1d_with_indices(in[0], {3}, {2}, {1}, {1}, true)
                                    : max_pool2d_with_indices(in[0], {2, 3}, {2, 1}, {1, 1}, {2, 1});
        return concat({flatten(r[0]), flatten(r[1].to(in[0].dtype()))}, 0);
      };
      op.sample = [dims](Dtype dt, const SampleSpec& s, Generator& g) {
        Shape xs = {s.sizes[0], s.sizes[1]};
        for (int d = 0; d < dims; ++d) xs.push_back(s.sizes[static_cast<std::size_t>(2 + d)]);
        return SampleInput{{{"x", values(xs, g, dt)}}, {}, {}};
      };
      op.size_names = {"n", "c"};
      op.small = {2, 3};
      op.threads = {8, 8};
      op.large = {40, 40};
      for (int d = 0; d < dims; ++d) {
        op.size_names.push_back(d == dims - 1 ? "w" : "h");
        op.small.push_back(7 - d);
        op.threads.push_back(dims == 1 ? 600 : 32);
        op.large.push_back(dims == 1 ? 300 : 60);
      }
      op.refuses = [](const SampleSpec& s) -> std::string {
        for (std::size_t i = 1; i < s.sizes.size(); ++i)
          if (s.sizes[i] == 0) return "empty non-batch dimension";
        // 2-d: height kernel 2, dilation 2 (span 3) with padding 1: any H >= 1 fits
        return "";
      };
      if (dims == 2)
        op.torch_skip = [](const SampleSpec& s) -> std::string {
          // H = 1: the window's rows -1 and 1 both lie outside; torch 1.13 returns index H * W (out of
          // its plane) and its backward writes there (heap corruption, the Python process aborts).
          // Ours: -inf, index -1, no gradient (ops/pool.hpp).
          return s.sizes[2] == 1 ? "torch 1.13 indexes out of bounds for a window with no element in range" : "";
        };
      const std::string name = op.name;
      op.errors = {{"integer x",
                    [dims] {
                      const Tensor x = Tensor::zeros(dims == 1 ? Shape{2, 3, 6} : Shape{2, 3, 6, 6}, kInt64);
                      if (dims == 1)
                        max_pool1d_with_indices(x, {2});
                      else
                        max_pool2d_with_indices(x, {2});
                    },
                    {name, "'x'", "int64"}}};
      t.push_back(op);
    }
  }
}

const bool registered = register_entries(__FILE__, add_pool_entries);

}  // namespace xgrad::test::table
