// Tests for core/from_blob.*: tensors over external memory (Note [External storage]): no copy,
// the owner or deleter released exactly once when the last sharing tensor (including a graph's
// saved copy) dies, xgrad's writes visible to the owner, gradients in fresh buffers, bad input.
#include <cstdint>
#include <memory>
#include <vector>

#include "support.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"

using namespace xgrad;
using xgrad::test::require_error;

TEST_CASE("from_blob views external memory without a copy", "[from_blob]") {
  std::vector<double> buf = {1, 2, 3, 4, 5, 6};
  Tensor t = from_blob(buf.data(), {2, 3}, kFloat64);
  REQUIRE(t.data<double>() == buf.data());
  REQUIRE(t.shape() == Shape{2, 3});
  REQUIRE(is_external(t));
  REQUIRE_FALSE(is_external(Tensor::zeros({2, 3})));
  REQUIRE_FALSE(is_external(Tensor::zeros({100000})));  // allocator-backed, not inline
  REQUIRE(t.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});
  // The owner's writes are visible (same memory), and so are xgrad's in-place writes.
  buf[4] = -1;
  REQUIRE(t.to_vector()[4] == -1);
  t.add_(Tensor::ones({2, 3}, kFloat64));
  REQUIRE(buf[0] == 2);
  REQUIRE(buf[4] == 0);
  // Reshapes alias the same memory.
  Tensor r = alias_with_shape(t, {6});
  REQUIRE(r.data<double>() == buf.data());
  REQUIRE(is_external(r));
}

TEST_CASE("from_blob releases the owner once, when the last sharing tensor dies", "[from_blob]") {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  std::weak_ptr<std::vector<float>> watch = owner;
  Tensor x = from_blob(owner->data(), {4}, kFloat32, std::shared_ptr<const void>(owner));
  owner.reset();
  REQUIRE_FALSE(watch.expired());  // the tensor holds it
  Tensor d = x.detach();
  x = Tensor();
  REQUIRE_FALSE(watch.expired());  // the detached alias still holds it
  d = Tensor();
  REQUIRE(watch.expired());
}

TEST_CASE("from_blob with a deleter: called once, after the graph that saved the tensor is gone", "[from_blob]") {
  std::vector<double> buf = {0.5, -1.5, 2.0};
  int calls = 0;
  void* seen = nullptr;
  {
    Tensor x = from_blob(buf.data(), {3}, kFloat64, [&](void* p) {
      ++calls;
      seen = p;
    });
    x.set_requires_grad();
    Tensor y = sum(mul(x, x));  // mul saves x for its backward
    x = Tensor();               // only the graph holds the storage now
    REQUIRE(calls == 0);
    y.backward(Tensor(), /*retain_graph=*/true);
    REQUIRE(calls == 0);
    y = Tensor();  // the graph dies with its output
  }
  REQUIRE(calls == 1);
  REQUIRE(seen == buf.data());
}

TEST_CASE("from_blob leaves: gradients land in fresh buffers, the memory is untouched", "[from_blob]") {
  std::vector<double> buf = {1, 2, 3};
  Tensor x = from_blob(buf.data(), {3}, kFloat64);
  REQUIRE(x.is_leaf());
  REQUIRE_FALSE(x.requires_grad());
  x.set_requires_grad();
  sum(mul(x, x)).backward();
  REQUIRE(x.grad().to_vector() == std::vector<double>{2, 4, 6});
  REQUIRE(x.grad().data<double>() != buf.data());
  REQUIRE_FALSE(is_external(x.grad()));
  REQUIRE(buf == std::vector<double>{1, 2, 3});
}

TEST_CASE("from_blob: empty shapes, 0-d and every dtype", "[from_blob]") {
  Tensor e = from_blob(nullptr, {0, 3}, kFloat32);
  REQUIRE(e.numel() == 0);
  REQUIRE(e.shape() == Shape{0, 3});
  std::int64_t v = 42;
  Tensor s = from_blob(&v, {}, kInt64);
  REQUIRE(s.item<std::int64_t>() == 42);
  std::vector<std::uint8_t> bytes = {1, 0, 1};
  REQUIRE(from_blob(bytes.data(), {3}, kBool).to_vector() == std::vector<double>{1, 0, 1});
}

TEST_CASE("from_blob refuses bad input", "[from_blob]") {
  require_error([] { from_blob(nullptr, {2, 3}, kFloat32); }, {"from_blob", "'data' is null", "(2, 3)"});
  alignas(8) unsigned char raw[32] = {};
  require_error([&] { from_blob(raw + 1, {2}, kFloat32); }, {"from_blob", "not aligned", "4-byte", "float32"});
  float f[2] = {};
  require_error([&] { from_blob(f, {-1, 2}, kFloat32); }, {"from_blob", "shape"});
}
