// Tests for autograd hooks (Note [Hooks] in core/autograd.hpp): Tensor::register_hook on leaves and
// non-leaves (value replacement, order, removal, several paths, retain_grad, grad(), create_graph,
// gradients through hooks on intermediate tensors against torch's) and
// Tensor::register_post_accumulate_grad_hook (once per backward, as soon as the leaf's gradient is
// complete, with retain_graph, on the thread running the backward, with 1 and 2 kernel threads and
// with concurrent backwards into a shared leaf).
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "scale_and_square.hpp"
#include "support.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/unary_math.hpp"

using namespace xgrad;
using xgrad::test::require_error;

namespace {
std::vector<double> vec(const Tensor& t) { return t.to_vector(); }
const Tensor kNoChange;  // what a hook returns to keep the gradient

// The backward events of one test, in order (nodes that log, post-accumulate hooks).
std::vector<std::string>* g_log = nullptr;

// Identity whose backward writes "probe" to g_log: shows where the engine is when a hook fires.
struct Probe : Function<Probe> {
  static constexpr const char* kName = "probe";
  Tensor forward(const Tensor& x) { return x.clone_data(); }
  Tensors backward(const Tensors& grads) {
    if (g_log) g_log->push_back("probe");
    return {grads[0]};
  }
};

using test::ScaleAndSquare;
}  // namespace

TEST_CASE("register_hook on a non-leaf: a returned gradient replaces the one that flows on", "[autograd][hooks]") {
  Tensor x = Tensor::of({1.0, -2.0}, kFloat64).set_requires_grad();
  Tensor y = mul(x, 2.0);
  std::vector<double> seen;
  y.register_hook([&](const Tensor& g) {
    seen = vec(g);
    return mul(g, 10.0);
  });
  sum(mul(y, y)).backward();  // dL/dy = 2y = 4x
  CHECK(seen == std::vector<double>{4.0, -8.0});
  CHECK(vec(x.grad()) == std::vector<double>{80.0, -160.0});  // 10 * 4x * 2

  // A hook returning nothing (the void overload) observes; so does one returning an undefined Tensor.
  Tensor x2 = Tensor::of({3.0}, kFloat64).set_requires_grad();
  Tensor y2 = exp(x2);
  int calls = 0;
  y2.register_hook([&](const Tensor& g) {
    ++calls;
    CHECK(g.item() == 5.0);
  });
  y2.register_hook([&](const Tensor&) {
    ++calls;
    return kNoChange;
  });
  mul(y2, 5.0).backward();
  CHECK(calls == 2);
  CHECK(x2.grad().item() == Approx(5.0 * std::exp(3.0)).epsilon(1e-15));
}

TEST_CASE("several hooks run in registration order, each given the previous result", "[autograd][hooks]") {
  Tensor x = Tensor::of({1.0, 2.0}, kFloat64).set_requires_grad();
  Tensor y = mul(x, 1.0);
  std::vector<int> order;
  std::vector<double> second_saw;
  y.register_hook([&](const Tensor& g) {
    order.push_back(1);
    return add(g, 1.0);
  });
  y.register_hook([&](const Tensor& g) {
    order.push_back(2);
    second_saw = vec(g);
  });
  y.register_hook([&](const Tensor& g) {
    order.push_back(3);
    return mul(g, 2.0);
  });
  y.backward(Tensor::of({10.0, 20.0}, kFloat64));
  CHECK(order == std::vector<int>{1, 2, 3});
  CHECK(second_saw == std::vector<double>{11.0, 21.0});
  CHECK(vec(x.grad()) == std::vector<double>{22.0, 42.0});
}

TEST_CASE("remove_hook: a removed hook runs no more, indices stay valid, bad indices are refused",
          "[autograd][hooks]") {
  Tensor x = Tensor::of({1.0}, kFloat64).set_requires_grad();
  Tensor y = mul(x, 1.0);
  int a = 0, b = 0;
  const unsigned ia = y.register_hook([&](const Tensor&) { ++a; });
  const unsigned ib = y.register_hook([&](const Tensor& g) {
    ++b;
    return mul(g, 3.0);
  });
  CHECK(ia == 0);
  CHECK(ib == 1);
  y.backward(Tensor(), /*retain_graph=*/true);
  CHECK((a == 1 && b == 1));
  CHECK(x.grad().item() == 3.0);
  y.remove_hook(ib);
  y.remove_hook(ib);  // removing again is a no-op (as torch's)
  y.backward(Tensor(), /*retain_graph=*/true);
  CHECK((a == 2 && b == 1));
  CHECK(x.grad().item() == 4.0);
  CHECK(y.register_hook([](const Tensor&) {}) == 2);  // a new hook gets a new index
  require_error([&] { y.remove_hook(3); }, {"remove_hook", "index 3", "3 hook(s)"});
  require_error([&] { x.remove_hook(0); }, {"remove_hook", "index 0", "0 hook(s)"});
  require_error([&] { x.remove_post_accumulate_grad_hook(0); }, {"remove_post_accumulate_grad_hook", "index 0"});

  // A hook may remove itself while it runs (a one-shot hook).
  Tensor z = mul(x, 2.0);
  int once = 0;
  unsigned self = 0;
  self = z.register_hook([&](const Tensor&) {
    ++once;
    z.remove_hook(self);
  });
  z.backward(Tensor(), /*retain_graph=*/true);
  z.backward();
  CHECK(once == 1);
}

TEST_CASE("register_hook and register_post_accumulate_grad_hook refuse bad arguments", "[autograd][hooks]") {
  Tensor plain = Tensor::ones({2}, kFloat64);
  require_error([&] { plain.register_hook([](const Tensor& g) { return g; }); },
                {"register_hook", "does not require grad"});
  require_error([&] { plain.register_post_accumulate_grad_hook([](Tensor&) {}); },
                {"register_post_accumulate_grad_hook", "does not require grad"});
  Tensor x = Tensor::of({1.0, 2.0}, kFloat64).set_requires_grad();
  require_error([&] { x.register_hook(std::function<Tensor(const Tensor&)>()); }, {"register_hook", "'hook'", "empty"});
  require_error([&] { x.register_post_accumulate_grad_hook(nullptr); },
                {"register_post_accumulate_grad_hook", "'hook'", "empty"});
  Tensor y = mul(x, 2.0);
  require_error([&] { y.register_post_accumulate_grad_hook([](Tensor&) {}); },
                {"register_post_accumulate_grad_hook", "non-leaf", "mul"});
  require_error([] { Tensor().register_hook([](const Tensor&) {}); }, {"register_hook", "undefined tensor"});
  // a hook returning a gradient of another shape or dtype is refused by the backward, naming it
  y.register_hook([](const Tensor&) { return Tensor::ones({3}, kFloat64); });
  require_error([&] { sum(y).backward(Tensor(), /*retain_graph=*/true); }, {"register_hook", "hook 0", "(3,)", "(2,)"});
  Tensor w = Tensor::of({1.0, 2.0}, kFloat64).set_requires_grad();
  w.register_hook([](const Tensor& g) { return g.to(kFloat32); });
  require_error([&] { sum(mul(w, 2.0)).backward(); }, {"register_hook", "float32", "float64"});
}

TEST_CASE("hooks on a leaf run once per backward on the summed gradient, before the add into .grad",
          "[autograd][hooks]") {
  Tensor x = Tensor::of({0.5, -1.0}, kFloat64).set_requires_grad();
  x.set_grad(Tensor::of({100.0, 200.0}, kFloat64));
  int calls = 0;
  std::vector<double> saw, grad_when_called;
  x.register_hook([&](const Tensor& g) {
    ++calls;
    saw = vec(g);
    grad_when_called = vec(x.grad());
    return mul(g, 3.0);
  });
  // three paths into x: x*x + exp(x) + x, so dy/dx = 2x + exp(x) + 1
  add(add(mul(x, x), exp(x)), x).backward(Tensor::ones({2}, kFloat64));
  CHECK(calls == 1);
  const std::vector<double> xv{0.5, -1.0};
  for (std::size_t i = 0; i < 2; ++i) {
    const double d = 2 * xv[i] + std::exp(xv[i]) + 1;
    CHECK(saw[i] == Approx(d).epsilon(1e-15));
    CHECK(vec(x.grad())[i] == Approx(grad_when_called[i] + 3 * d).epsilon(1e-15));
  }
  CHECK(grad_when_called == std::vector<double>{100.0, 200.0});  // .grad was not yet touched

  // a leaf that is itself the root: its hook sees the seed
  Tensor r = Tensor::of({1.0, 2.0}, kFloat64).set_requires_grad();
  r.register_hook([](const Tensor& g) { return mul(g, 2.0); });
  r.backward(Tensor::of({5.0, 7.0}, kFloat64));
  CHECK(vec(r.grad()) == std::vector<double>{10.0, 14.0});
}

TEST_CASE("a non-leaf reached by several paths: its hook sees the summed gradient once", "[autograd][hooks]") {
  Tensor x = Tensor::of({0.25, 2.0}, kFloat64).set_requires_grad();
  Tensor a = mul(x, 2.0);
  int calls = 0;
  std::vector<double> saw;
  a.register_hook([&](const Tensor& g) {
    ++calls;
    saw = vec(g);
  });
  add(a, mul(a, a)).backward(Tensor::ones({2}, kFloat64));  // dc/da = 1 + 2a
  CHECK(calls == 1);
  CHECK(saw == std::vector<double>{2.0, 9.0});

  // hooks live on the grad_fn (as torch's): they fire after the tensor's last handle is gone
  Tensor x2 = Tensor::of({1.0}, kFloat64).set_requires_grad();
  int fired = 0;
  Tensor out;
  {
    Tensor mid = mul(x2, 4.0);
    mid.register_hook([&](const Tensor& g) {
      ++fired;
      return mul(g, 0.5);
    });
    out = exp(mid);
  }
  out.backward();
  CHECK(fired == 1);
  CHECK(x2.grad().item() == Approx(0.5 * 4.0 * std::exp(4.0)).epsilon(1e-15));
}

TEST_CASE("hooks of a multi-output node's outputs, retain_grad and the hooked value", "[autograd][hooks]") {
  Tensor x = Tensor::of({1.0, 2.0}, kFloat64).set_requires_grad();
  Tensors outs = apply<ScaleAndSquare>(x);
  std::vector<double> saw0, saw1;
  outs[0].register_hook([&](const Tensor& g) { saw0 = vec(g); });
  outs[1].register_hook([&](const Tensor& g) {
    saw1 = vec(g);
    return mul(g, 2.0);
  });
  outs[1].retain_grad();
  sum(outs[1]).backward();  // only output 1 is used: output 0's gradient is zeros
  CHECK(saw0 == std::vector<double>{0.0, 0.0});
  CHECK(saw1 == std::vector<double>{1.0, 1.0});
  CHECK(vec(outs[1].grad()) == std::vector<double>{2.0, 2.0});  // retain_grad stores the hooked value
  CHECK(vec(x.grad()) == std::vector<double>{4.0, 8.0});        // 2 * 2x
}

TEST_CASE("hooks in grad(): a non-leaf's and a requested leaf's change what grad returns", "[autograd][hooks]") {
  Tensor x = Tensor::of({1.0, 3.0}, kFloat64).set_requires_grad();
  Tensor w = Tensor::of({2.0, 2.0}, kFloat64).set_requires_grad();
  int x_calls = 0, w_calls = 0, post_calls = 0;
  x.register_hook([&](const Tensor& g) {
    ++x_calls;
    return mul(g, 10.0);
  });
  w.register_hook([&](const Tensor&) { ++w_calls; });
  x.register_post_accumulate_grad_hook([&](Tensor&) { ++post_calls; });
  Tensor y = mul(x, w);
  y.register_hook([](const Tensor& g) { return add(g, 1.0); });
  const Tensors g = grad({sum(y)}, {x, x});             // the same input twice: its hooks run once
  CHECK(vec(g[0]) == std::vector<double>{40.0, 40.0});  // (1 + 1) * w * 10
  CHECK(vec(g[1]) == std::vector<double>{40.0, 40.0});
  CHECK(x_calls == 1);
  CHECK(w_calls == 0);     // w is not requested: no gradient is computed for it
  CHECK(post_calls == 0);  // grad() accumulates nothing
  CHECK_FALSE(x.grad().defined());
  const Tensors gy = grad({sum(mul(y, y))}, {y});  // a requested non-leaf: its hook applies
  CHECK(vec(gy[0]) == std::vector<double>{2 * 2.0 + 1, 2 * 6.0 + 1});
}

TEST_CASE("hooks under create_graph: the hook sees a gradient with history and is differentiated through",
          "[autograd][hooks][create_graph]") {
  // y = 3x, L = sum(y^2): dL/dy = 2y (with history); the hook scales it by x, so
  // dL/dx = 3 * 2y * x = 18 x^2 and its derivative is 36 x (the hook's factor x differentiated too)
  Tensor x = Tensor::of({0.5, -2.0}, kFloat64).set_requires_grad();
  Tensor y = mul(x, 3.0);
  bool had_history = false;
  const unsigned h = y.register_hook([&](const Tensor& g) {
    had_history = g.grad_fn() != nullptr;
    return mul(g, x);
  });
  const Tensor g1 = grad({sum(mul(y, y))}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  CHECK(had_history);
  REQUIRE(g1.grad_fn());
  CHECK(vec(g1) == std::vector<double>{18 * 0.25, 18 * 4.0});
  y.remove_hook(h);  // the second backward goes through y's node again: its hook would run there too
  const Tensor g2 = grad({sum(g1)}, {x})[0];
  CHECK(vec(g2) == std::vector<double>{36 * 0.5, 36 * -2.0});

  // without create_graph the hook sees a gradient without history
  Tensor y2 = mul(x, 3.0);
  y2.register_hook([&](const Tensor& g) { had_history = g.grad_fn() != nullptr; });
  sum(mul(y2, y2)).backward();
  CHECK_FALSE(had_history);

  // on a leaf, with backward(create_graph): .grad = hook(2u) = 2u * u, d(sum .grad)/du = 4u
  Tensor u = Tensor::of({1.5, 0.5}, kFloat64).set_requires_grad();
  const unsigned hu = u.register_hook([&](const Tensor& g) { return mul(g, u); });
  sum(mul(u, u)).backward(Tensor(), std::nullopt, /*create_graph=*/true);
  REQUIRE(u.grad().grad_fn());
  CHECK(vec(u.grad()) == std::vector<double>{2 * 1.5 * 1.5, 2 * 0.5 * 0.5});
  u.remove_hook(hu);  // else it would also scale the next grad() (a requested leaf's hooks run there)
  CHECK(vec(grad({sum(u.grad())}, {u})[0]) == std::vector<double>{4 * 1.5, 4 * 0.5});
  // backward(create_graph) leaves u -> .grad -> its graph -> u: a cycle (as torch warns); break it
  u.set_grad(Tensor());
}

TEST_CASE("post-accumulate-grad hook: once per backward, as soon as the leaf's gradient is complete",
          "[autograd][hooks]") {
  std::vector<std::string> log;
  g_log = &log;
  Tensor x = Tensor::of({1.0, 2.0}, kFloat64).set_requires_grad();
  Tensor w = Tensor::of({3.0, 4.0}, kFloat64).set_requires_grad();
  std::vector<std::vector<double>> x_grads;
  x.register_post_accumulate_grad_hook([&](Tensor& t) {
    CHECK(t.is_same(x));  // the leaf itself
    log.push_back("x");
    x_grads.push_back(vec(t.grad()));
  });
  w.register_post_accumulate_grad_hook([&](Tensor&) { log.push_back("w"); });
  // p's node is recorded first, so it runs last: x's gradient is complete before it runs
  Tensor p = apply<Probe>(w);
  Tensor q = add(mul(x, x), mul(x, 2.0));  // two paths into x: dq/dx = 2x + 2
  Tensor loss = add(sum(p), sum(q));
  loss.backward(Tensor(), /*retain_graph=*/true);
  CHECK(log == std::vector<std::string>{"x", "probe", "w"});
  REQUIRE(x_grads.size() == 1);
  CHECK(x_grads[0] == std::vector<double>{4.0, 6.0});  // .grad is final for this backward
  // retain_graph: a second backward fires each hook once more, after its accumulation
  loss.backward();
  CHECK(log == std::vector<std::string>{"x", "probe", "w", "x", "probe", "w"});
  REQUIRE(x_grads.size() == 2);
  CHECK(x_grads[1] == std::vector<double>{8.0, 12.0});
  g_log = nullptr;

  // register_hook hooks run before the add, post-accumulate hooks after it; removal works alike
  Tensor v = Tensor::of({1.0}, kFloat64).set_requires_grad();
  std::vector<std::string> events;
  v.register_hook([&](const Tensor& g) {
    events.push_back("pre " + std::to_string(static_cast<int>(g.item())));
    return mul(g, 2.0);
  });
  const unsigned post = v.register_post_accumulate_grad_hook(
      [&](Tensor& t) { events.push_back("post " + std::to_string(static_cast<int>(t.grad().item()))); });
  mul(v, 5.0).backward();
  CHECK(events == std::vector<std::string>{"pre 5", "post 10"});
  v.remove_post_accumulate_grad_hook(post);
  mul(v, 5.0).backward();
  CHECK(events == std::vector<std::string>{"pre 5", "post 10", "pre 5"});
  CHECK(v.grad().item() == 20.0);

  // a leaf that no gradient reaches in a backward: its hooks do not fire
  Tensor unused = Tensor::of({1.0}, kFloat64).set_requires_grad();
  int fired = 0;
  unused.register_post_accumulate_grad_hook([&](Tensor&) { ++fired; });
  unused.register_hook([&](const Tensor&) { ++fired; });
  Tensor other = Tensor::of({1.0}, kFloat64).set_requires_grad();
  mul(other, 2.0).backward();
  CHECK(fired == 0);
}

TEST_CASE("post-accumulate-grad hook: an optimizer step in the backward (torch's example)", "[autograd][hooks]") {
  // torch's docs: v.register_post_accumulate_grad_hook(lambda p: p.add_(p.grad, alpha=-lr))
  Tensor v = Tensor::zeros({3}, kFloat64).set_requires_grad();
  const double lr = 0.01;
  v.register_post_accumulate_grad_hook([lr](Tensor& p) {
    p.add_(p.grad(), -lr);  // grad mode is off in the hook: no NoGradGuard needed
    p.zero_grad();
  });
  v.backward(Tensor::of({1.0, 2.0, 3.0}, kFloat64));
  CHECK(vec(v) == std::vector<double>{-0.01, -0.02, -0.03});
  CHECK_FALSE(v.grad().defined());
}

TEST_CASE("post-accumulate-grad hook under create_graph: .grad has history when the hook runs",
          "[autograd][hooks][create_graph]") {
  Tensor x = Tensor::of({2.0}, kFloat64).set_requires_grad();
  bool had_history = false;
  x.register_post_accumulate_grad_hook([&](Tensor& t) { had_history = t.grad().grad_fn() != nullptr; });
  sum(mul(mul(x, x), x)).backward(Tensor(), std::nullopt, /*create_graph=*/true);
  CHECK(had_history);
  CHECK(x.grad().item() == 12.0);
  x.set_grad(Tensor());  // the cycle x -> .grad -> its graph -> x that backward(create_graph) makes
}

TEST_CASE("hooks with 1 and 2 kernel threads: the same results, fired once each, on the calling thread",
          "[autograd][hooks][threads]") {
  Generator gen(3);
  const Tensor xv = Tensor::randn({3 * kParallelGrain + 5}, gen, kFloat64);
  const auto run = [&] {
    const auto caller = std::this_thread::get_id();
    Tensor x = xv.clone_data().set_requires_grad();
    int pre = 0, mid_calls = 0, post = 0;
    bool on_caller = true;
    x.register_hook([&](const Tensor& g) {
      ++pre;
      on_caller = on_caller && std::this_thread::get_id() == caller;
      return mul(g, 1.5);
    });
    Tensor mid = tanh(x);
    mid.register_hook([&](const Tensor& g) {
      ++mid_calls;
      on_caller = on_caller && std::this_thread::get_id() == caller;
      return mul(g, g);
    });
    Tensor grad_seen;
    x.register_post_accumulate_grad_hook([&](Tensor& t) {
      ++post;
      on_caller = on_caller && std::this_thread::get_id() == caller;
      grad_seen = t.grad();
    });
    sum(add(mul(mid, x), exp(x))).backward();
    CHECK((pre == 1 && mid_calls == 1 && post == 1));
    CHECK(on_caller);
    REQUIRE(grad_seen.defined());
    CHECK(bit_equal(grad_seen, x.grad()));
    return Tensors{x.grad()};
  };
  xgrad::test::require_thread_deterministic(run);
}

TEST_CASE("concurrent backwards into a shared leaf: each fires its hooks once, on its own thread",
          "[autograd][hooks][threads]") {
  Tensor w = Tensor::ones({4}, kFloat64).set_requires_grad();
  std::mutex m;
  std::vector<std::thread::id> pre_threads, post_threads;
  bool grads_defined = true;  // Catch2's assertions are not thread-safe: checked after the joins
  w.register_hook([&](const Tensor& g) {
    const std::lock_guard<std::mutex> lock(m);
    pre_threads.push_back(std::this_thread::get_id());
    return mul(g, 2.0);
  });
  w.register_post_accumulate_grad_hook([&](Tensor& t) {
    const bool defined = t.grad().defined();
    const std::lock_guard<std::mutex> lock(m);
    grads_defined = grads_defined && defined;
    post_threads.push_back(std::this_thread::get_id());
  });
  std::thread::id id1, id2;
  std::thread t1([&] {
    id1 = std::this_thread::get_id();
    sum(mul(w, 2.0)).backward();
  });
  std::thread t2([&] {
    id2 = std::this_thread::get_id();
    sum(mul(w, 3.0)).backward();
  });
  t1.join();
  t2.join();
  CHECK(grads_defined);
  CHECK(vec(w.grad()) == std::vector<double>{10.0, 10.0, 10.0, 10.0});  // 2 * (2 + 3)
  REQUIRE(pre_threads.size() == 2);
  REQUIRE(post_threads.size() == 2);
  const auto ran_on_both = [&](const std::vector<std::thread::id>& ids) {
    return (ids[0] == id1 && ids[1] == id2) || (ids[0] == id2 && ids[1] == id1);
  };
  CHECK(ran_on_both(pre_threads));
  CHECK(ran_on_both(post_threads));
}

TEST_CASE("gradients through hooks on intermediate tensors match torch's", "[autograd][hooks][parity]") {
  // torch 1.13's parity driver differentiates with torch.autograd.grad, which (unlike torch 2 and
  // xgrad) runs no hook of a leaf: the cases hook intermediate tensors only
  test::ParityBatch batch("hooks");
  Generator gen(17);
  const std::vector<test::ParityBatch::Input> xw = {{"x", Tensor::randn({3, 4}, gen, kFloat64)},
                                                    {"w", Tensor::randn({3, 4}, gen, kFloat64)}};
  batch.add("replace_several_paths", "a = x * w\na.register_hook(lambda g: g * 3)\nout = a + a * a + torch.sin(a)", xw,
            [](const Tensors& in) {
              Tensor a = mul(in[0], in[1]);
              a.register_hook([](const Tensor& g) { return mul(g, 3.0); });
              return add(add(a, mul(a, a)), sin(a));
            });
  batch.add("order",
            "y = torch.tanh(x)\ny.register_hook(lambda g: g + 1)\ny.register_hook(lambda g: g * w.detach())\n"
            "out = y * w",
            xw, [](const Tensors& in) {
              Tensor y = tanh(in[0]);
              y.register_hook([](const Tensor& g) { return add(g, 1.0); });
              const Tensor w = in[1].detach();
              y.register_hook([w](const Tensor& g) { return mul(g, w); });
              return mul(y, in[1]);
            });
  batch.add("none_then_clamp_chain",
            "y = x * w\ny.register_hook(lambda g: None)\ny.register_hook(lambda g: g.clamp(-0.5, 0.5))\n"
            "z = torch.exp(y)\nz.register_hook(lambda g: g * 0.5)\nout = torch.sigmoid(z) * x",
            xw, [](const Tensors& in) {
              Tensor y = mul(in[0], in[1]);
              y.register_hook([](const Tensor&) { return Tensor(); });
              y.register_hook([](const Tensor& g) { return clamp(g, -0.5, 0.5); });
              Tensor z = exp(y);
              z.register_hook([](const Tensor& g) { return mul(g, 0.5); });
              return mul(sigmoid(z), in[0]);
            });
  batch.run();
}
