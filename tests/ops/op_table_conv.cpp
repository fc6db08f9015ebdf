// The op table's entries for ops/conv.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of conv.hpp.
void add_conv_entries(std::vector<OpInfo>& t) {
  // x (n, cg * groups, [h,] w); conv weight (og * groups, cg, k...), transposed weight (cg * groups, og,
  // k...); one entry per public function and a few per mode.
  {
    struct ConvCase {
      std::string name, fn;
      int dims;
      bool transposed, bias, unbatched;
      std::int64_t groups;
      std::vector<std::int64_t> k, stride, dilation, output_padding;
      std::vector<std::int64_t> padv;  // numeric padding (one per dim)
      std::string pad_mode;            // "same" / "valid", else numeric
      std::string torch_args;          // Python keyword arguments after (x, w, b)
      // the gradcheck sizes (n, cg, og, [h,] w) when not the default: the *_direct entries' grids of
      // 64 positions or more, with og and cg of at least half a tile's rows, run the direct kernels
      // of Note [Direct convolution] in the forward, both gradients and second order
      std::vector<std::int64_t> small = {};
    };
    const std::vector<ConvCase> cases = {
        {"conv1d", "conv1d", 1, false, true, false, 1, {3}, {2}, {1}, {}, {1}, "", "stride=2, padding=1"},
        {"conv1d_same_groups_dilated",
         "conv1d",
         1,
         false,
         false,
         false,
         2,
         {4},
         {1},
         {2},
         {},
         {},
         "same",
         "padding='same', dilation=2, groups=2"},
        {"conv2d",
         "conv2d",
         2,
         false,
         true,
         false,
         1,
         {3, 2},
         {2, 1},
         {1, 1},
         {},
         {1, 0},
         "",
         "stride=(2, 1), padding=(1, 0)"},
        {"conv2d_same_groups",
         "conv2d",
         2,
         false,
         false,
         false,
         2,
         {3, 4},
         {1, 1},
         {1, 1},
         {},
         {},
         "same",
         "padding='same', groups=2"},
        {"conv1d_same_direct",
         "conv1d",
         1,
         false,
         true,
         false,
         1,
         {5},
         {1},
         {1},
         {},
         {2},
         "",
         "padding=2",
         {2, 4, 4, 70}},
        {"conv2d_same_direct",
         "conv2d",
         2,
         false,
         true,
         false,
         1,
         {3, 3},
         {1, 1},
         {1, 1},
         {},
         {},
         "same",
         "padding='same'",
         {1, 4, 4, 9, 8}},
        // one input and one output channel per group (depthwise), and two outputs per input: the
        // single-row tiles of Note [Direct convolution] and the depthwise weight gradient
        {"conv2d_depthwise_direct",
         "conv2d",
         2,
         false,
         true,
         false,
         4,
         {3, 3},
         {1, 1},
         {1, 1},
         {},
         {},
         "same",
         "padding='same', groups=4",
         {2, 1, 1, 9, 8}},
        {"conv1d_depthwise_multiplier_direct",
         "conv1d",
         1,
         false,
         false,
         false,
         3,
         {5},
         {1},
         {1},
         {},
         {2},
         "",
         "padding=2, groups=3",
         {2, 1, 2, 70}},
        {"conv2d_valid_dilated_unbatched",
         "conv2d",
         2,
         false,
         true,
         true,
         1,
         {2, 3},
         {1, 2},
         {2, 1},
         {},
         {},
         "valid",
         "stride=(1, 2), padding='valid', dilation=(2, 1)"},
        {"conv_transpose1d",
         "conv_transpose1d",
         1,
         true,
         true,
         false,
         1,
         {3},
         {2},
         {1},
         {1},
         {1},
         "",
         "stride=2, padding=1, output_padding=1"},
        {"conv_transpose2d",
         "conv_transpose2d",
         2,
         true,
         true,
         false,
         2,
         {3, 2},
         {2, 1},
         {1, 2},
         {1, 0},
         {1, 0},
         "",
         "stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2, dilation=(1, 2)"},
        {"conv_transpose2d_unbatched",
         "conv_transpose2d",
         2,
         true,
         false,
         true,
         1,
         {2, 2},
         {1, 1},
         {1, 1},
         {0, 0},
         {0, 0},
         "",
         ""},
    };
    for (const ConvCase& cc : cases) {
      OpInfo op;
      op.name = cc.name;
      op.signature = cc.transposed
                         ? cc.fn +
                               "(Tensor,Tensor,Tensor,vector<int64_t>,vector<int64_t>,vector<int64_t>,int64_t,"
                               "vector<int64_t>)"
                         : cc.fn + "(Tensor,Tensor,Tensor,vector<int64_t>,ConvPadding,vector<int64_t>,int64_t)";
      op.torch = fmt::format("out = torch.nn.functional.{}(x, w, {}{}{})", cc.fn, cc.bias ? "b" : "None",
                             cc.torch_args.empty() ? "" : ", ", cc.torch_args);
      op.call = [cc](const Tensors& in) {
        const Tensor b = cc.bias ? in[2] : Tensor();
        if (cc.transposed) {
          const auto f = cc.dims == 1 ? conv_transpose1d : conv_transpose2d;
          return f(in[0], in[1], b, cc.stride, cc.padv, cc.output_padding, cc.groups, cc.dilation);
        }
        const ConvPadding pad = cc.pad_mode.empty() ? ConvPadding(cc.padv) : ConvPadding(cc.pad_mode);
        const auto f = cc.dims == 1 ? conv1d : conv2d;
        return f(in[0], in[1], b, cc.stride, pad, cc.dilation, cc.groups);
      };
      op.sample = [cc](Dtype dt, const SampleSpec& s, Generator& g) {
        const std::int64_t n = s.sizes[0], cg = s.sizes[1], og = s.sizes[2];
        Shape xs = {n, cg * cc.groups};
        if (cc.unbatched) xs.erase(xs.begin());
        Shape ws = cc.transposed ? Shape{cg * cc.groups, og} : Shape{og * cc.groups, cg};
        for (int d = 0; d < cc.dims; ++d) {
          xs.push_back(s.sizes[static_cast<std::size_t>(3 + d)]);
          ws.push_back(cc.k[static_cast<std::size_t>(d)]);
        }
        SampleInput si{{{"x", values(xs, g, dt)}, {"w", values(ws, g, dt)}}, {}, {}};
        if (cc.bias) si.inputs.push_back({"b", values({og * cc.groups}, g, dt)});
        return si;
      };
      op.size_names = {"n", "cg", "og"};
      op.small = {2, 2, 3};
      op.threads = {16, 4, 8};
      op.large = {40, 24, 24};
      for (int d = 0; d < cc.dims; ++d) {
        op.size_names.push_back(d == cc.dims - 1 ? "w" : "h");
        op.small.push_back(cc.dims == 1 ? 7 : 5 + d);
        op.threads.push_back(cc.dims == 1 ? 1000 : 28);
        op.large.push_back(cc.dims == 1 ? 300 : 40);
      }
      if (!cc.small.empty()) op.small = cc.small;
      if (cc.unbatched) op.threads = {1, 16, 16, 64, 64};  // no batch: more channels and pixels instead
      op.refuses = [cc](const SampleSpec& s) -> std::string {
        const std::int64_t cg = s.sizes[1], og = s.sizes[2];
        for (int d = 0; d < cc.dims; ++d)
          if (s.sizes[static_cast<std::size_t>(3 + d)] == 0) return "only the batch and channel dimensions";
        if (cc.transposed) {
          if (cg == 0 || og == 0) return "must be non-empty";
          return "";
        }
        if (og == 0) return "at least 1 at dimension 0";
        for (int d = 0; d < cc.dims; ++d) {
          const auto i = static_cast<std::size_t>(d);
          const std::int64_t span = cc.dilation[i] * (cc.k[i] - 1) + 1;
          const std::int64_t padded = s.sizes[3 + i] + (cc.pad_mode == "same" ? span - 1
                                                        : cc.pad_mode.empty() ? 2 * cc.padv[i]
                                                                              : 0);
          if (padded < span) return "smaller than the (dilated) kernel";
        }
        return "";
      };
      const Tensor x4 = Tensor::zeros({2, 4, 6, 6}, kFloat64), w4 = Tensor::zeros({4, 4, 3, 3}, kFloat64);
      const Tensor x3 = Tensor::zeros({2, 4, 6}, kFloat64), w3 = Tensor::zeros({4, 4, 3}, kFloat64);
      const std::string opname = cc.fn;
      if (cc.name == "conv2d")
        op.errors = {
            {"channel mismatch",
             [] {
               conv2d(Tensor::zeros({2, 3, 6, 6}, kFloat64), Tensor::zeros({4, 2, 3, 3}, kFloat64));
             },
             {"conv2d", "(4, 2, 3, 3)", "(2, 3, 6, 6)", "channels"}},
            {"groups not dividing out channels",
             [x4] {
               conv2d(x4, Tensor::zeros({3, 2, 3, 3}, kFloat64), Tensor(), {1}, 0, {1}, 2);
             },
             {"conv2d", "groups=2", "(3, 2, 3, 3)"}},
            {"groups 0", [x4, w4] { conv2d(x4, w4, Tensor(), {1}, 0, {1}, 0); }, {"conv2d", "'groups'", "0"}},
            {"kernel larger than the padded input",
             [] {
               conv2d(Tensor::zeros({1, 1, 2, 6}, kFloat64), Tensor::zeros({1, 1, 5, 3}, kFloat64), Tensor(), {1}, 1);
             },
             {"conv2d", "(1, 1, 2, 6)", "(1, 1, 5, 3)", "kernel"}},
            {"zero stride", [x4, w4] { conv2d(x4, w4, Tensor(), {0}); }, {"conv2d", "'stride'", "(0,)"}},
            {"negative stride",
             [x4, w4] {
               conv2d(x4, w4, Tensor(), {1, -2});
             },
             {"conv2d", "'stride'", "(1, -2)"}},
            {"three strides",
             [x4, w4] {
               conv2d(x4, w4, Tensor(), {1, 1, 1});
             },
             {"conv2d", "'stride'", "3"}},
            {"zero dilation", [x4, w4] { conv2d(x4, w4, Tensor(), {1}, 0, {0}); }, {"conv2d", "'dilation'"}},
            {"negative padding", [x4, w4] { conv2d(x4, w4, Tensor(), {1}, -1); }, {"conv2d", "'padding'", "(-1,)"}},
            {"unknown padding mode",
             [x4, w4] { conv2d(x4, w4, Tensor(), {1}, "full"); },
             {"conv2d", "'padding'", "full"}},
            {"same with stride 2",
             [x4, w4] { conv2d(x4, w4, Tensor(), {2}, "same"); },
             {"conv2d", "\"same\"", "strided"}},
            {"bias of the wrong size",
             [x4, w4] { conv2d(x4, w4, Tensor::zeros({3}, kFloat64)); },
             {"conv2d", "'bias'", "(3,)", "(4,)"}},
            {"x 2-d",
             [w4] {
               conv2d(Tensor::zeros({6, 6}, kFloat64), w4);
             },
             {"conv2d", "'x'", "(6, 6)"}},
            {"weight 3-d", [x4, w3] { conv2d(x4, w3); }, {"conv2d", "'weight'", "(4, 4, 3)"}},
            {"empty spatial dim",
             [w4] {
               conv2d(Tensor::zeros({2, 4, 0, 6}, kFloat64), w4, Tensor(), {1}, 2);
             },
             {"conv2d", "(2, 4, 0, 6)"}},
            {"dtype mix",
             [w4] {
               conv2d(Tensor::zeros({2, 4, 6, 6}, kFloat32), w4);
             },
             {"conv2d", "float32", "float64"}},
            {"undefined x", [w4] { conv2d(Tensor(), w4); }, {"conv2d", "'x'"}},
            {"undefined weight", [x4] { conv2d(x4, Tensor()); }, {"conv2d", "'weight'"}},
            {"integer x",
             [w4] {
               conv2d(Tensor::zeros({2, 4, 6, 6}, kInt64), w4);
             },
             {"conv2d", "'x'", "int64"}}};
      if (cc.name == "conv1d")
        op.errors = {{"channel mismatch",
                      [] {
                        conv1d(Tensor::zeros({2, 3, 6}, kFloat64), Tensor::zeros({4, 2, 3}, kFloat64));
                      },
                      {"conv1d", "(4, 2, 3)", "(2, 3, 6)", "channels"}},
                     {"two strides for 1-d",
                      [x3, w3] {
                        conv1d(x3, w3, Tensor(), {1, 1});
                      },
                      {"conv1d", "'stride'", "2"}},
                     {"kernel larger than the input",
                      [x3] {
                        conv1d(x3, Tensor::zeros({4, 4, 7}, kFloat64));
                      },
                      {"conv1d", "(2, 4, 6)", "(4, 4, 7)", "kernel"}},
                     {"x 4-d", [x4, w3] { conv1d(x4, w3); }, {"conv1d", "'x'", "(2, 4, 6, 6)"}}};
      if (cc.name == "conv_transpose2d")
        op.errors = {
            {"channel mismatch",
             [] {
               conv_transpose2d(Tensor::zeros({2, 3, 6, 6}, kFloat64), Tensor::zeros({4, 2, 3, 3}, kFloat64));
             },
             {"conv_transpose2d", "(4, 2, 3, 3)", "(2, 3, 6, 6)", "channels"}},
            {"groups not dividing in channels",
             [] {
               conv_transpose2d(Tensor::zeros({2, 3, 6, 6}, kFloat64), Tensor::zeros({3, 2, 3, 3}, kFloat64), Tensor(),
                                {1}, {0}, {0}, 2);
             },
             {"conv_transpose2d", "groups=2", "3"}},
            {"output_padding too large",
             [x4, w4] { conv_transpose2d(x4, w4, Tensor(), {2}, {0}, {2}); },
             {"conv_transpose2d", "'output_padding'", "(2,)"}},
            {"output too small",
             [] {
               conv_transpose2d(Tensor::zeros({1, 1, 1, 1}, kFloat64), Tensor::zeros({1, 1, 1, 1}, kFloat64), Tensor(),
                                {1}, {1});
             },
             {"conv_transpose2d", "(1, 1, 1, 1)", "too small"}},
            {"zero stride", [x4, w4] { conv_transpose2d(x4, w4, Tensor(), {0}); }, {"conv_transpose2d", "'stride'"}},
            {"bias of the wrong size",
             [x4, w4] { conv_transpose2d(x4, w4, Tensor::zeros({5}, kFloat64)); },
             {"conv_transpose2d", "'bias'", "(5,)"}},
            {"undefined x", [w4] { conv_transpose2d(Tensor(), w4); }, {"conv_transpose2d", "'x'"}}};
      if (cc.name == "conv_transpose1d")
        op.errors = {
            {"weight 4-d", [x3, w4] { conv_transpose1d(x3, w4); }, {"conv_transpose1d", "'weight'", "(4, 4, 3, 3)"}},
            {"negative padding",
             [x3, w3] { conv_transpose1d(x3, w3, Tensor(), {1}, {-1}); },
             {"conv_transpose1d", "'padding'", "(-1,)"}}};
      if (!cc.transposed)
        op.torch_skip = [](const SampleSpec& s) -> std::string {
          return s.sizes[1] == 0 ? "torch 1.13 gives (N, 0, ...) for an input with 0 channels; ours gives the bias"
                                 : "";
        };
      op.check_undefined = false;  // an undefined bias means no bias; undefined x and weight: errors above
      t.push_back(op);
    }
  }
}

const bool registered = register_entries(__FILE__, add_conv_entries);

}  // namespace xgrad::test::table
