// Tests for core/gradcheck.*: passes on correct ops over random inputs and shapes, fails (naming
// the worst element) on a deliberately wrong custom Function, rejects float32 and misuse.
#include <cmath>

#include "support.hpp"
#include "xgrad/ops/elementwise.hpp"

using namespace xgrad;
using xgrad::test::require_error;

namespace {
// y = a * b elementwise, with a correct gradient for `a` and a gradient for `b` that is wrong by
// `bump` at flat element `bad_index` only (bump = 0: a correct op).
struct MulWithBug : Function<MulWithBug> {
  static constexpr const char* kName = "mul_with_bug";
  std::int64_t bad_index = -1;
  double bump = 0;
  Tensor forward(const Tensor& a, const Tensor& b, std::int64_t bad, double bump_) {
    bad_index = bad;
    bump = bump_;
    save_for_backward({a, b});
    return mul(a, b);
  }
  Tensors backward(const Tensors& grads) {
    const Tensor a = saved(0), b = saved(1);
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = mul(grads[0], b);
    if (needs_input_grad(1)) {
      gb = mul(grads[0], a).clone_data();
      if (bad_index >= 0) gb.data<double>()[bad_index] += bump * grads[0].data<double>()[bad_index];
    }
    return {ga, gb};
  }
};

Tensor mul_with_bug(const Tensor& a, const Tensor& b, std::int64_t bad, double bump) {
  return apply<MulWithBug>(a, b, bad, bump);
}

// y = exp(x) with a backward that forgets the chain rule (returns exp(x), ignoring the incoming
// gradient): right only when the seed is 1, so it fails once y feeds another op.
struct ExpNoChain : Function<ExpNoChain> {
  static constexpr const char* kName = "exp_no_chain";
  Tensor forward(const Tensor& x) {
    Tensor y = exp(x);
    save_for_backward({y});
    return y;
  }
  Tensors backward(const Tensors&) { return {saved(0).clone_data()}; }
};
}  // namespace

TEST_CASE("gradcheck passes on correct ops over random shapes and inputs", "[gradcheck]") {
  Generator gen(77);
  for (int trial = 0; trial < 12; ++trial) {
    // Random rank 0-3 and dims 1-4, the second input broadcast against the first half the time.
    Shape s;
    const auto rank = static_cast<std::int64_t>(gen.integer(4));
    for (std::int64_t d = 0; d < rank; ++d) s.push_back(1 + static_cast<std::int64_t>(gen.integer(4)));
    Shape sb = s;
    if (trial % 2 == 1 && !sb.empty()) sb.erase(sb.begin());
    INFO("trial " << trial << " shapes " << shape_str(s) << " " << shape_str(sb));
    Tensor a = test::uniform_leaf(s, gen, -1.5, 1.5);
    Tensor b = test::uniform_leaf(sb, gen, 0.5, 2.0);
    const Tensor a0 = a.clone_data(), b0 = b.clone_data();
    const GradcheckReport rep =
        gradcheck([](const Tensors& in) { return add(mul(tanh(in[0]), in[1]), div(exp(in[0]), in[1])); }, {a, b});
    INFO(rep.message);
    CHECK(rep.ok);
    CHECK(rep.max_abs_error < 1e-7);
    CHECK(rep.message.find("passed") != std::string::npos);
    // gradcheck restores the inputs and leaves .grad alone.
    CHECK(bit_equal(a.detach(), a0));
    CHECK(bit_equal(b.detach(), b0));
    CHECK_FALSE(a.grad().defined());
  }
  // A correct custom Function (bump 0) passes too; an input that needs no grad is skipped.
  Tensor a = test::randn_leaf({2, 3}, gen);
  Tensor b = test::randn_leaf({2, 3}, gen);
  test::require_gradcheck([](const Tensors& in) { return mul_with_bug(in[0], in[1], -1, 0); }, {a, b});
  Tensor c = Tensor::randn({2, 3}, gen, kFloat64);  // no grad
  test::require_gradcheck([](const Tensors& in) { return mul_with_bug(in[0], in[1], 4, 100.0); }, {a, c});
  // A 0-d output.
  Tensor s = test::randn_leaf({}, gen);
  test::require_gradcheck([](const Tensors& in) { return sigmoid(mul(in[0], in[0])); }, {s});
}

TEST_CASE("gradcheck fails on a wrong backward and names the worst element", "[gradcheck]") {
  Generator gen(5);
  Tensor a = test::uniform_leaf({3, 4}, gen, 0.5, 1.5);
  Tensor b = test::uniform_leaf({3, 4}, gen, 0.5, 1.5);
  // The gradient of input 1 is off by 0.5 * seed at element 7 and right everywhere else.
  const GradcheckReport rep = gradcheck([](const Tensors& in) { return mul_with_bug(in[0], in[1], 7, 0.5); }, {a, b});
  INFO(rep.message);
  CHECK_FALSE(rep.ok);
  CHECK(rep.worst_input == 1);
  CHECK(rep.worst_element == 7);
  CHECK(rep.worst_output == 7);  // elementwise: output 7 depends on element 7
  const double a7 = a.to_vector()[7];
  CHECK(rep.numeric == Approx(a7).epsilon(1e-8));
  CHECK(rep.analytic == Approx(a7 + 0.5).epsilon(1e-12));
  CHECK(rep.max_abs_error == Approx(0.5).epsilon(1e-6));
  CHECK(rep.message.find("FAILED") != std::string::npos);
  CHECK(rep.message.find("input 1 element 7 output 7") != std::string::npos);

  // The wrong element inside a composite is still found: y = exp_no_chain(x) * 3.
  Tensor x = test::uniform_leaf({5}, gen, -1, 1);
  const GradcheckReport r2 = gradcheck([](const Tensors& in) { return mul(apply<ExpNoChain>(in[0]), 3.0); }, {x});
  INFO(r2.message);
  CHECK_FALSE(r2.ok);
  CHECK(r2.worst_input == 0);
  // analytic exp(x), numeric 3 exp(x): the error 2 exp(x) is largest at the largest x.
  const auto xv = x.to_vector();
  const auto argmax = std::max_element(xv.begin(), xv.end()) - xv.begin();
  CHECK(r2.worst_element == argmax);
  CHECK(r2.worst_output == argmax);

  // A NaN gradient fails.
  Tensor p = test::uniform_leaf({3}, gen, 0.5, 1.5);
  const GradcheckReport r3 =
      gradcheck([](const Tensors& in) { return mul_with_bug(in[0], in[0], 1, std::nan("")); }, {p});
  INFO(r3.message);
  CHECK_FALSE(r3.ok);
  CHECK(r3.worst_element == 1);
}

TEST_CASE("gradcheck rejects float32 inputs and misuse", "[gradcheck]") {
  Generator gen(9);
  Tensor f32 = Tensor::randn({3}, gen, kFloat32).set_requires_grad();
  require_error([&] { gradcheck([](const Tensors& in) { return mul(in[0], in[0]); }, {f32}); },
                {"gradcheck", "input 0", "float32", "float64"});
  Tensor ok = test::randn_leaf({3}, gen);
  require_error(
      [&] {
        gradcheck([](const Tensors& in) { return mul(in[0], in[1]); }, {ok, f32});
      },
      {"gradcheck", "input 1", "float32"});
  Tensor no_grad = Tensor::randn({3}, gen, kFloat64);
  require_error([&] { gradcheck([](const Tensors& in) { return mul(in[0], in[0]); }, {no_grad}); },
                {"gradcheck", "no input requires grad"});
  require_error([&] { gradcheck([](const Tensors& in) { return in[0]; }, {Tensor()}); }, {"gradcheck", "undefined"});
  require_error([&] { gradcheck([](const Tensors&) { return Tensor::ones({2}, kFloat64); }, {ok}); },
                {"gradcheck", "does not depend"});
  require_error([&] { gradcheck([](const Tensors& in) { return in[0].to(kFloat32); }, {ok}); },
                {"gradcheck", "float64"});
}
