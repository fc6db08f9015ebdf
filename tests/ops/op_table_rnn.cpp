// The op table's entries for ops/rnn.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// The entries of rnn.hpp.
void add_rnn_entries(std::vector<OpInfo>& t) {
  // lstm_cell and gru_cell (batch, in, hidden), with and without biases; lstm_layer and
  // gru_layer (seq, batch, in, hidden) in both directions, against a Python loop of torch's cells.
  // The several outputs are compared joined: cells (batch, 2 H) for the LSTM's {h', c'}; layers the
  // flattened output, h_n (and c_n) end to end.
  {
    const auto flat = [](const Tensors& rs) {
      Tensors parts;
      for (const Tensor& r : rs) parts.push_back(reshape(r, {-1}));
      return cat(parts, 0);
    };
    const auto rnn_sample = [](std::int64_t gates, bool layer, bool lstm, bool bias) {
      return [=](Dtype dt, const SampleSpec& s, Generator& g) {
        const std::int64_t seq = layer ? s.sizes[0] : 1, o = layer ? 1 : 0;
        const std::int64_t b = s.sizes[o], in = s.sizes[o + 1], h = s.sizes[o + 2];
        SampleInput si;
        si.inputs.push_back({"x", layer ? values({seq, b, in}, g, dt) : values({b, in}, g, dt)});
        si.inputs.push_back({"h", values({b, h}, g, dt)});
        if (lstm) si.inputs.push_back({"c", values({b, h}, g, dt)});
        si.inputs.push_back({"w_ih", values({gates * h, in}, g, dt)});
        si.inputs.push_back({"w_hh", values({gates * h, h}, g, dt)});
        if (bias) {
          si.inputs.push_back({"b_ih", values({gates * h}, g, dt)});
          si.inputs.push_back({"b_hh", values({gates * h}, g, dt)});
        }
        return si;
      };
    };
    const Tensor x23 = Tensor::zeros({2, 3}, kFloat64), h24 = Tensor::zeros({2, 4}, kFloat64);
    const Tensor w16x3 = Tensor::zeros({16, 3}, kFloat64), w16x4 = Tensor::zeros({16, 4}, kFloat64);
    const Tensor w12x3 = Tensor::zeros({12, 3}, kFloat64), w12x4 = Tensor::zeros({12, 4}, kFloat64);
    const Tensor x523 = Tensor::zeros({5, 2, 3}, kFloat64);
    for (const bool bias : {true, false}) {
      OpInfo op;
      op.name = bias ? "lstm_cell" : "lstm_cell_nobias";
      op.signature = "lstm_cell(Tensor,Tensors,Tensor,Tensor,Tensor,Tensor)";
      op.torch = std::string(bias ? "h1, c1 = torch.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh)\n"
                                  : "h1, c1 = torch.lstm_cell(x, (h, c), w_ih, w_hh)\n") +
                 "out = torch.cat([h1, c1], -1)";
      op.call = [bias](const Tensors& in) {
        return cat(lstm_cell(in[0], {in[1], in[2]}, in[3], in[4], bias ? in[5] : Tensor(), bias ? in[6] : Tensor()),
                   -1);
      };
      op.sample = rnn_sample(4, false, true, bias);
      op.size_names = {"batch", "in", "hidden"};
      op.small = {3, 4, 5};
      op.threads = {256, 32, 128};
      op.large = {300, 300, 100};
      op.check_undefined = false;  // undefined biases mean none; the other inputs: errors below
      if (bias)
        op.errors = {{"input of the wrong size",
                      [=] {
                        lstm_cell(Tensor::zeros({2, 5}, kFloat64), {h24, h24}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'input'", "(2, 5)", "input_size = 3"}},
                     {"h of the wrong shape",
                      [=] {
                        lstm_cell(x23, {Tensor::zeros({3, 4}, kFloat64), h24}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'hx[0]'", "(3, 4)", "(2, 4)"}},
                     {"c of the wrong shape",
                      [=] {
                        lstm_cell(x23, {h24, Tensor::zeros({2, 5}, kFloat64)}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'hx[1]'", "(2, 5)", "(2, 4)"}},
                     {"hx not 2 tensors", [=] { lstm_cell(x23, {h24}, w16x3, w16x4); }, {"lstm_cell", "'hx'", "2"}},
                     {"w_hh not (4 H, H)",
                      [=] {
                        lstm_cell(x23, {h24, h24}, w16x3, Tensor::zeros({12, 4}, kFloat64));
                      },
                      {"lstm_cell", "'w_hh'", "(12, 4)"}},
                     {"w_ih rows differ",
                      [=] {
                        lstm_cell(x23, {h24, h24}, w12x3, w16x4);
                      },
                      {"lstm_cell", "'w_ih'", "(12, 3)"}},
                     {"bias of the wrong size",
                      [=] {
                        lstm_cell(x23, {h24, h24}, w16x3, w16x4, Tensor::zeros({12}, kFloat64));
                      },
                      {"lstm_cell", "'b_ih'", "(12,)", "(16,)"}},
                     {"input 3-d",
                      [=] {
                        lstm_cell(Tensor::zeros({1, 2, 3}, kFloat64), {h24, h24}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'input'", "(1, 2, 3)"}},
                     {"dtype mix",
                      [=] {
                        lstm_cell(x23, {h24, h24}, w16x3.to(kFloat32), w16x4);
                      },
                      {"lstm_cell", "'w_ih'", "float32", "float64"}},
                     {"undefined input",
                      [=] {
                        lstm_cell(Tensor(), {h24, h24}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'input'"}},
                     {"undefined c",
                      [=] {
                        lstm_cell(x23, {h24, Tensor()}, w16x3, w16x4);
                      },
                      {"lstm_cell", "'hx[1]'"}},
                     {"undefined w_hh",
                      [=] {
                        lstm_cell(x23, {h24, h24}, w16x3, Tensor());
                      },
                      {"lstm_cell", "'w_hh'"}}};
      t.push_back(op);
    }
    for (const bool bias : {true, false}) {
      OpInfo op;
      op.name = bias ? "gru_cell" : "gru_cell_nobias";
      op.signature = "gru_cell(Tensor,Tensor,Tensor,Tensor,Tensor,Tensor)";
      op.torch = bias ? "out = torch.gru_cell(x, h, w_ih, w_hh, b_ih, b_hh)" : "out = torch.gru_cell(x, h, w_ih, w_hh)";
      op.call = [bias](const Tensors& in) {
        return gru_cell(in[0], in[1], in[2], in[3], bias ? in[4] : Tensor(), bias ? in[5] : Tensor());
      };
      op.sample = rnn_sample(3, false, false, bias);
      op.size_names = {"batch", "in", "hidden"};
      op.small = {3, 4, 5};
      op.threads = {256, 32, 128};
      op.large = {300, 300, 100};
      op.check_undefined = false;
      if (bias)
        op.errors = {
            {"input of the wrong size",
             [=] {
               gru_cell(Tensor::zeros({2, 5}, kFloat64), h24, w12x3, w12x4);
             },
             {"gru_cell", "'input'", "(2, 5)", "input_size = 3"}},
            {"h of the wrong shape",
             [=] {
               gru_cell(x23, Tensor::zeros({2, 3}, kFloat64), w12x3, w12x4);
             },
             {"gru_cell", "'hx'", "(2, 3)", "(2, 4)"}},
            {"unbatched input, batched h",
             [=] { gru_cell(Tensor::zeros({3}, kFloat64), h24, w12x3, w12x4); },
             {"gru_cell", "'hx'", "(2, 4)", "(4,)"}},
            {"LSTM weights", [=] { gru_cell(x23, h24, w16x3, w16x4); }, {"gru_cell", "'w_hh'", "(16, 4)"}},
            {"b_hh of the wrong size",
             [=] { gru_cell(x23, h24, w12x3, w12x4, Tensor(), Tensor::zeros({16}, kFloat64)); },
             {"gru_cell", "'b_hh'", "(16,)", "(12,)"}},
            {"dtype mix", [=] { gru_cell(x23, h24.to(kFloat32), w12x3, w12x4); }, {"gru_cell", "'hx'", "float32"}},
            {"undefined h", [=] { gru_cell(x23, Tensor(), w12x3, w12x4); }, {"gru_cell", "'hx'"}},
            {"undefined w_ih", [=] { gru_cell(x23, h24, Tensor(), w12x4); }, {"gru_cell", "'w_ih'"}}};
      t.push_back(op);
    }
    for (const bool lstm : {true, false})
      for (const bool reverse : {false, true}) {
        OpInfo op;
        op.name = std::string(lstm ? "lstm_layer" : "gru_layer") + (reverse ? "_reverse" : "");
        op.signature = lstm ? "lstm_layer(Tensor,Tensor,Tensor,Tensor,Tensor,Tensor,Tensor,bool)"
                            : "gru_layer(Tensor,Tensor,Tensor,Tensor,Tensor,Tensor,bool)";
        op.torch = fmt::format(
            "hh = h\n{}"
            "outs = [None] * x.shape[0]\n"
            "for t in {}:\n"
            "    {}\n"
            "    outs[t] = hh\n"
            "out = torch.cat([torch.stack(outs).flatten() if outs else x.new_zeros(0), hh.flatten(){}])",
            lstm ? "cc = c\n" : "", reverse ? "range(x.shape[0] - 1, -1, -1)" : "range(x.shape[0])",
            lstm ? "hh, cc = torch.lstm_cell(x[t], (hh, cc), w_ih, w_hh, b_ih, b_hh)"
                 : "hh = torch.gru_cell(x[t], hh, w_ih, w_hh, b_ih, b_hh)",
            lstm ? ", cc.flatten()" : "");
        op.call = [lstm, reverse, flat](const Tensors& in) {
          return lstm ? flat(lstm_layer(in[0], in[1], in[2], in[3], in[4], in[5], in[6], reverse))
                      : flat(gru_layer(in[0], in[1], in[2], in[3], in[4], in[5], reverse));
        };
        op.sample = rnn_sample(lstm ? 4 : 3, true, lstm, true);
        op.size_names = {"seq", "batch", "in", "hidden"};
        op.small = {3, 2, 3, 4};
        op.threads = {4, 128, 32, 64};
        op.large = {40, 100, 100, 60};
        op.check_undefined = false;
        if (!reverse)
          op.errors =
              lstm
                  ? std::vector<ErrorCase>{{"input 2-d",
                                            [=] { lstm_layer(x23, h24, h24, w16x3, w16x4); },
                                            {"lstm_layer", "'input'", "(2, 3)", "(seq_len, batch, input_size)"}},
                                           {"input of the wrong size",
                                            [=] {
                                              lstm_layer(Tensor::zeros({5, 2, 4}, kFloat64), h24, h24, w16x3, w16x4);
                                            },
                                            {"lstm_layer", "'input'", "(5, 2, 4)", "input_size = 3"}},
                                           {"h0 of the wrong batch",
                                            [=] {
                                              lstm_layer(x523, Tensor::zeros({3, 4}, kFloat64), h24, w16x3, w16x4);
                                            },
                                            {"lstm_layer", "'h0'", "(3, 4)", "(2, 4)"}},
                                           {"c0 undefined",
                                            [=] { lstm_layer(x523, h24, Tensor(), w16x3, w16x4); },
                                            {"lstm_layer", "'c0'"}},
                                           {"b_hh of the wrong size",
                                            [=] { lstm_layer(x523, h24, h24, w16x3, w16x4, Tensor(), h24); },
                                            {"lstm_layer", "'b_hh'", "(2, 4)"}}}
                  : std::vector<ErrorCase>{
                        {"input of the wrong size",
                         [=] {
                           gru_layer(Tensor::zeros({5, 2, 4}, kFloat64), h24, w12x3, w12x4);
                         },
                         {"gru_layer", "'input'", "(5, 2, 4)", "input_size = 3"}},
                        {"h0 3-d",
                         [=] {
                           gru_layer(x523, Tensor::zeros({1, 2, 4}, kFloat64), w12x3, w12x4);
                         },
                         {"gru_layer", "'h0'", "(1, 2, 4)", "(2, 4)"}},
                        {"undefined input", [=] { gru_layer(Tensor(), h24, w12x3, w12x4); }, {"gru_layer", "'input'"}}};
        t.push_back(op);
      }
  }
}

const bool registered = register_entries(__FILE__, add_rnn_entries);

}  // namespace xgrad::test::table
