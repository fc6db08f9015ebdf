// The op table's entries for ops/loss.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

namespace {

std::vector<std::int64_t> to_index(const Tensor& t) {
  std::vector<std::int64_t> out;
  for (double v : t.to_vector()) out.push_back(static_cast<std::int64_t>(v));
  return out;
}

/// Class indices for `samples` samples of `classes` classes, every 4th one ignore_index (-100); all
/// ignored when there are no classes.
Tensor class_targets(const Shape& shape, std::int64_t classes, Generator& gen) {
  Tensor t = Tensor::zeros(shape, kFloat64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    p[i] = (classes == 0 || i % 4 == 3) ? -100.0 : std::min<double>(classes - 1, std::floor(gen.uniform() * classes));
  return t;
}

/// input and target (batch..., n), both differentiable.
OpInfo pointwise_loss(std::string opname, std::string torch_fn, std::string extra,
                      std::function<Tensor(const Tensor&, const Tensor&, Reduction)> f, Reduction r, std::string sig) {
  const char* rname = r == Reduction::Mean ? "mean" : r == Reduction::Sum ? "sum" : "none";
  OpInfo op;
  op.name = opname + "_" + rname;
  op.signature = std::move(sig);
  op.torch = fmt::format("out = torch.nn.functional.{}(a, t, reduction='{}'{})", torch_fn, rname, extra);
  op.call = [f, r](const Tensors& in) { return f(in[0], in[1], r); };
  op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
    const Shape sh = s.scalar ? Shape{} : bshape(s.batch, {s.sizes[0]});
    return SampleInput{{{"a", values(sh, g, dt)}, {"t", values(sh, g, dt)}}, {}, {}};
  };
  op.size_names = {"n"};
  op.small = {6};
  op.threads = {40000};
  op.supports_batch = true;
  op.supports_scalar = true;
  if (r == Reduction::Mean)
    op.refuses = [](const SampleSpec& s) -> std::string {
      return !s.scalar && s.sizes[0] * numel_of(s.batch) == 0 ? "mean reduction of an empty input" : "";
    };
  op.errors = {
      {"(N, 1) against (N)",
       [f, r] {
         f(Tensor::zeros({3, 1}, kFloat64), Tensor::zeros({3}, kFloat64), r);
       },
       {opname, "(3, 1)", "(3,)"}},
      {"dtype mix", [f, r] { f(Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat32), r); }, {opname, "dtype"}},
  };
  return op;
}

}  // namespace

// The entries of loss.hpp.
void add_loss_entries(std::vector<OpInfo>& t) {
  using D = Domain;
  // pointwise losses x reductions
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    t.push_back(pointwise_loss(
        "mse_loss", "mse_loss", "", [](auto& a, auto& b, Reduction rr) { return mse_loss(a, b, rr); }, r,
        "mse_loss(Tensor,Tensor,Reduction)"));
    t.push_back(pointwise_loss(
        "l1_loss", "l1_loss", "", [](auto& a, auto& b, Reduction rr) { return l1_loss(a, b, rr); }, r,
        "l1_loss(Tensor,Tensor,Reduction)"));
    OpInfo hub = pointwise_loss(
        "huber_loss", "huber_loss", ", delta=0.7",
        [](auto& a, auto& b, Reduction rr) { return huber_loss(a, b, rr, 0.7); }, r,
        "huber_loss(Tensor,Tensor,Reduction,double)");
    hub.errors.push_back(
        {"delta = 0",
         [] { huber_loss(Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat64), Reduction::Mean, 0.0); },
         {"huber_loss", "'delta'"}});
    t.push_back(hub);
    OpInfo sl1 = pointwise_loss(
        "smooth_l1_loss", "smooth_l1_loss", ", beta=0.7",
        [](auto& a, auto& b, Reduction rr) { return smooth_l1_loss(a, b, rr, 0.7); }, r,
        "smooth_l1_loss(Tensor,Tensor,Reduction,double)");
    sl1.errors.push_back(
        {"beta < 0",
         [] { smooth_l1_loss(Tensor::zeros({3}, kFloat64), Tensor::zeros({3}, kFloat64), Reduction::Mean, -1.0); },
         {"smooth_l1_loss", "'beta'"}});
    t.push_back(sl1);
  }
  // class-index losses: scores (N, C) with a std::vector target, (N, C, d) with a Tensor target
  for (const std::string opname : {"cross_entropy", "nll_loss"}) {
    const bool ce = opname == "cross_entropy";
    {
      OpInfo op;
      op.name = opname + "_vector_mean";
      op.signature = ce ? "cross_entropy(Tensor,vector<int64_t>,Reduction,double,int64_t)"
                        : "nll_loss(Tensor,vector<int64_t>,Reduction,int64_t)";
      op.torch = fmt::format("out = torch.nn.functional.{}(z, y.long(), reduction='mean')", opname);
      op.call = [ce](const Tensors& in) {
        return ce ? cross_entropy(in[0], to_index(in[1])) : nll_loss(in[0], to_index(in[1]));
      };
      op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        return SampleInput{
            {{"z", values({s.sizes[0], s.sizes[1]}, g, dt)}, {"y", class_targets({s.sizes[0]}, s.sizes[1], g), false}},
            {},
            {}};
      };
      op.size_names = {"N", "C"};
      op.small = {5, 4};
      op.threads = {400, 100};
      op.check_undefined = false;  // the target is a std::vector here; the scores are checked by the Tensor form
      op.int64_inputs = {"y"};     // converted to the vector by the call
      op.refuses = [](const SampleSpec& s) -> std::string {
        // Mean over no counted sample: none at all, or all ignored (no class to aim at, C = 0)
        return (s.sizes[0] == 0 || s.sizes[1] == 0) ? "mean reduction over no samples" : "";
      };
      op.errors = {
          {"target length != N",
           [ce] {
             const Tensor z = Tensor::zeros({3, 4}, kFloat64);
             ce ? cross_entropy(z, std::vector<std::int64_t>{0, 1}) : nll_loss(z, std::vector<std::int64_t>{0, 1});
           },
           {opname, "(3, 4)"}},
          {"class index out of range",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4}, kFloat64);
             ce ? cross_entropy(z, std::vector<std::int64_t>{0, 4}) : nll_loss(z, std::vector<std::int64_t>{0, 4});
           },
           {opname, "4"}},
          {"0-d scores",
           [ce] {
             const Tensor z = Tensor::scalar(1.0, kFloat64);
             ce ? cross_entropy(z, std::vector<std::int64_t>{0}) : nll_loss(z, std::vector<std::int64_t>{0});
           },
           {opname, "()"}},
      };
      if (ce)
        op.errors.push_back(
            {"label_smoothing > 1",
             [] {
               cross_entropy(Tensor::zeros({2, 3}, kFloat64), std::vector<std::int64_t>{0, 1}, Reduction::Mean, 1.5);
             },
             {"cross_entropy", "'label_smoothing'"}});
      t.push_back(op);
    }
    {
      OpInfo op;
      op.name = opname + "_tensor_sum_spatial";
      op.signature =
          ce ? "cross_entropy(Tensor,Tensor,Reduction,double,int64_t)" : "nll_loss(Tensor,Tensor,Reduction,int64_t)";
      op.torch = fmt::format("out = torch.nn.functional.{}(z, y.long(), reduction='sum'{})", opname,
                             ce ? ", label_smoothing=0.1" : "");
      // The sample's targets are float for the parity batch; ours takes them as int64.
      op.call = [ce](const Tensors& in) {
        const Tensor y = in[1].defined() ? in[1].to(kInt64) : in[1];
        return ce ? cross_entropy(in[0], y, Reduction::Sum, 0.1) : nll_loss(in[0], y, Reduction::Sum);
      };
      op.int64_inputs = {"y"};
      op.sample = [](Dtype dt, const SampleSpec& s, Generator& g) {
        return SampleInput{{{"z", values({s.sizes[0], s.sizes[1], s.sizes[2]}, g, dt)},
                            {"y", class_targets({s.sizes[0], s.sizes[2]}, s.sizes[1], g).to(dt), false}},
                           {},
                           {}};
      };
      op.size_names = {"N", "C", "d"};
      op.torch_skip = [](const SampleSpec& s) -> std::string {
        // torch 1.13 views (N, 0, d) scores as (N, 0, 0, 0): "size mismatch"; ours gives 0 as for (N, 0)
        return s.sizes[1] == 0 ? "torch fails on C = 0 with spatial dimensions" : "";
      };
      op.small = {3, 4, 2};
      op.threads = {20, 100, 20};
      op.errors = {
          {"target of the wrong shape",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4, 3}, kFloat64), y = Tensor::zeros({2, 2}, kFloat64);
             ce ? cross_entropy(z, y) : nll_loss(z, y);
           },
           {opname, "(2, 2)", "(2, 4, 3)"}},
          {"float target",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4}, kFloat64), y = Tensor::of({0.0, 1.0}, kFloat64);
             ce ? cross_entropy(z, y) : nll_loss(z, y);
           },
           {opname, "'target'", "float64", "target.to(xgrad::kInt64)"}},
          {"target requiring grad",
           [ce] {
             const Tensor z = Tensor::zeros({2, 4}, kFloat64);
             Tensor y = Tensor::of({0.0, 1.0}, kFloat64);
             y.set_requires_grad();
             ce ? cross_entropy(z, y) : nll_loss(z, y);
           },
           {opname, "target"}},
      };
      t.push_back(op);
    }
  }
  {
    for (bool pw : {false, true}) {
      OpInfo op;
      op.name = pw ? "bce_with_logits_pos_weight_sum" : "bce_with_logits_mean";
      op.signature = "binary_cross_entropy_with_logits(Tensor,Tensor,Reduction,Tensor)";
      op.torch = pw ? "out = torch.nn.functional.binary_cross_entropy_with_logits(a, t, reduction='sum', pos_weight=w)"
                    : "out = torch.nn.functional.binary_cross_entropy_with_logits(a, t, reduction='mean')";
      op.call = [pw](const Tensors& in) {
        return pw ? binary_cross_entropy_with_logits(in[0], in[1], Reduction::Sum, in[2])
                  : binary_cross_entropy_with_logits(in[0], in[1]);
      };
      op.sample = [pw](Dtype dt, const SampleSpec& s, Generator& g) {
        const Shape sh = bshape(s.batch, {s.sizes[0], s.sizes[1]});
        SampleInput si{{{"a", values(sh, g, dt)}, {"t", values(sh, g, dt, D::unit)}}, {}, {}};
        // torch 1.13 does not differentiate pos_weight; its gradient is gradchecked in test_loss.cpp
        if (pw) si.inputs.push_back({"w", values({s.sizes[1]}, g, dt, D::positive), false});
        return si;
      };
      op.size_names = {"n", "c"};
      op.small = {3, 4};
      op.threads = {200, 200};
      op.supports_batch = true;
      op.check_undefined = !pw;  // an undefined pos_weight means "none"
      if (!pw)
        op.refuses = [](const SampleSpec& s) -> std::string {
          return s.sizes[0] * s.sizes[1] * numel_of(s.batch) == 0 ? "mean reduction of an empty input" : "";
        };
      op.errors = {{"shape mismatch",
                    [] {
                      binary_cross_entropy_with_logits(Tensor::zeros({3, 1}, kFloat64), Tensor::zeros({3}, kFloat64));
                    },
                    {"binary_cross_entropy_with_logits", "(3, 1)", "(3,)"}},
                   {"pos_weight not a suffix",
                    [] {
                      binary_cross_entropy_with_logits(Tensor::zeros({2, 3}, kFloat64), Tensor::zeros({2, 3}, kFloat64),
                                                       Reduction::Mean, Tensor::ones({2}, kFloat64));
                    },
                    {"binary_cross_entropy_with_logits", "'pos_weight'", "(2,)"}}};
      t.push_back(op);
    }
  }
}

const bool registered = register_entries(__FILE__, add_loss_entries);

}  // namespace xgrad::test::table
