// Tests for the integer and bool dtypes of core/dtype.hpp and core/tensor.*: names, sizes,
// promotion, creation in every dtype, data<T>/item<T>, to() between all pairs (with PyTorch's
// conversion rules), copies, printing, and the requires_grad refusal.
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <vector>
#include <xtensor/xarray.hpp>

#include "support.hpp"
#include "xgrad/core/xtensor_interop.hpp"

using namespace xgrad;
using xgrad::test::require_error;

namespace {
std::string to_string(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}
const std::vector<Dtype> kAll = {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool};
}  // namespace

TEST_CASE("dtype names, sizes, constants, dtype_of", "[dtype]") {
  CHECK(dtype_name(kInt64) == "int64");
  CHECK(dtype_name(kInt32) == "int32");
  CHECK(dtype_name(kUInt8) == "uint8");
  CHECK(dtype_name(kBool) == "bool");
  CHECK(dtype_name(kFloat32) == "float32");
  CHECK(dtype_size(kInt64) == 8);
  CHECK(dtype_size(kInt32) == 4);
  CHECK(dtype_size(kUInt8) == 1);
  CHECK(dtype_size(kBool) == 1);
  CHECK(static_cast<int>(kFloat32) == 0);
  CHECK(static_cast<int>(kFloat64) == 1);
  CHECK(kLong == kInt64);
  CHECK(kInt == kInt32);
  CHECK(kByte == kUInt8);
  STATIC_REQUIRE(dtype_of<std::int64_t>() == kInt64);
  STATIC_REQUIRE(dtype_of<std::int32_t>() == kInt32);
  STATIC_REQUIRE(dtype_of<std::uint8_t>() == kUInt8);
  STATIC_REQUIRE(dtype_of<bool>() == kBool);
  STATIC_REQUIRE(is_floating_point(kFloat64));
  STATIC_REQUIRE(!is_floating_point(kInt64));
  STATIC_REQUIRE(!is_floating_point(kBool));
  CHECK(fmt::format("{}", kBool) == "bool");
}

TEST_CASE("promote_types follows torch.promote_types", "[dtype]") {
  // Expected values are torch 1.13's torch.promote_types for every pair of our six dtypes; the
  // order is bool < uint8 < int32 < int64 < float32 < float64.
  const std::vector<Dtype> order = {kBool, kUInt8, kInt32, kInt64, kFloat32, kFloat64};
  for (std::size_t i = 0; i < order.size(); ++i)
    for (std::size_t j = 0; j < order.size(); ++j) {
      INFO(dtype_name(order[i]) << " " << dtype_name(order[j]));
      CHECK(promote_types(order[i], order[j]) == order[std::max(i, j)]);
    }
  CHECK(promote_types(kInt64, kFloat32) == kFloat32);
  CHECK(promote_types(kBool, kBool) == kBool);
  CHECK(promote_types(kUInt8, kInt32) == kInt32);
}

TEST_CASE("dispatch refuses integer dtypes, dispatch_all covers all six", "[dtype]") {
  const auto size_of = [](Dtype d) {
    return dispatch_all(d, [](auto tag) { return sizeof(typename decltype(tag)::type); });
  };
  for (Dtype d : kAll) CHECK(size_of(d) == dtype_size(d));
  CHECK(dispatch(kFloat64, [](auto tag) { return sizeof(typename decltype(tag)::type); }) == 8);
  require_error(
      [] {
        dispatch(
            kInt64, [](auto) { return 0; }, "myop");
      },
      {"myop", "int64", "float32 or float64"});
  require_error([] { dispatch(kBool, [](auto) { return 0; }); }, {"bool", ".to(xgrad::kFloat32)"});
}

TEST_CASE("check_floating names the op, the argument and the dtype", "[dtype]") {
  check_floating("exp", "x", Tensor::zeros({2}));
  check_floating("exp", "x", Tensor());  // undefined: the op's own check reports it
  require_error([] { check_floating("exp", "x", Tensor::zeros({2}, kInt64)); },
                {"exp", "argument 'x'", "int64", "x.to(xgrad::kFloat32)"});
  require_error([] { check_floating("mse_loss", "target", Tensor::zeros({2}, kBool)); },
                {"mse_loss", "argument 'target'", "bool"});
}

TEST_CASE("creation in every dtype", "[dtype]") {
  for (Dtype d : kAll) {
    INFO(dtype_name(d));
    const Tensor z = Tensor::zeros({2, 3}, d);
    CHECK(z.dtype() == d);
    CHECK(z.nbytes() == 6 * dtype_size(d));
    CHECK(z.to_vector() == std::vector<double>(6, 0.0));
    CHECK(Tensor::ones({4}, d).to_vector() == std::vector<double>(4, 1.0));
    CHECK(Tensor::full({3}, 2.0, d).to_vector() == std::vector<double>(3, d == kBool ? 1.0 : 2.0));
    CHECK(Tensor::scalar(1.0, d).item() == 1.0);
    CHECK(Tensor::scalar(1.0, d).dim() == 0);
    CHECK(Tensor::empty({0}, d).numel() == 0);
    CHECK(Tensor::of({0, 1, 0}, d).to_vector() == std::vector<double>{0, 1, 0});
    CHECK(Tensor::of({{1, 0}, {0, 1}}, d).shape() == Shape{2, 2});
    CHECK(Tensor::arange(0, 2, 1, d).to_vector() == std::vector<double>{0, 1});
    CHECK(Tensor::from_vector({1, 0, 1, 1}, {2, 2}, d).to_vector() == std::vector<double>{1, 0, 1, 1});
  }
  // Integer values: torch.full((3,), -2.7, dtype=torch.int64) is [-2, -2, -2] (truncation).
  CHECK(Tensor::full({3}, -2.7, kInt64).to_vector() == std::vector<double>{-2, -2, -2});
  CHECK(Tensor::full({1}, 300, kUInt8).to_vector() == std::vector<double>{44});  // low 8 bits, as torch
  CHECK(Tensor::full({1}, 0.5, kBool).to_vector() == std::vector<double>{1});
  CHECK(Tensor::arange(0, 10, 3, kInt64).to_vector() == std::vector<double>{0, 3, 6, 9});
  CHECK(Tensor::arange(5, 0, -2, kInt32).to_vector() == std::vector<double>{5, 3, 1});
  CHECK(Tensor::of({-1, 2, 255}, kInt32).to_vector() == std::vector<double>{-1, 2, 255});
}

TEST_CASE("linspace, rand and randn refuse non-floating dtypes", "[dtype]") {
  Generator gen(1);
  require_error([] { Tensor::linspace(0, 1, 5, kInt64); }, {"linspace", "int64", "floating point"});
  require_error([&] { Tensor::rand({2}, gen, kInt32); }, {"rand", "int32", "floating point"});
  require_error([&] { Tensor::randn({2}, gen, kBool); }, {"randn", "bool"});
}

TEST_CASE("from_data, data<T> and item<T> for the integer types", "[dtype]") {
  const std::int64_t big = (std::int64_t{1} << 60) + 1;  // not representable as a double
  const std::vector<std::int64_t> v64 = {big, -3, 0};
  const Tensor t = Tensor::from_data<std::int64_t>(v64, {3});
  CHECK(t.dtype() == kInt64);
  CHECK(t.data<std::int64_t>()[0] == big);
  CHECK(Tensor::from_data<std::int64_t>(std::span(v64).subspan(0, 1), {}).item<std::int64_t>() == big);
  require_error([&] { (void)t.data<float>(); }, {"data<float32>", "int64"});
  require_error([&] { (void)t.data<std::int32_t>(); }, {"data<int32>", "int64"});

  const std::vector<std::int32_t> v32 = {7, -8};
  CHECK(Tensor::from_data<std::int32_t>(v32, {2, 1}).to_vector() == std::vector<double>{7, -8});
  const std::vector<std::uint8_t> v8 = {0, 255};
  CHECK(Tensor::from_data<std::uint8_t>(v8, {2}).to_vector() == std::vector<double>{0, 255});
  const bool vb[] = {true, false, true};
  const Tensor b = Tensor::from_data<bool>(vb, {3});
  CHECK(b.dtype() == kBool);
  CHECK(b.to_vector() == std::vector<double>{1, 0, 1});
  CHECK(Tensor::scalar(-2.9).item<std::int64_t>() == -2);
  CHECK(Tensor::scalar(3, kInt32).item<float>() == 3.0f);
  CHECK(Tensor::scalar(3, kInt32).item<bool>());
}

TEST_CASE("to() between every pair of dtypes, with torch's conversion rules", "[dtype]") {
  // Values chosen to be exact in every dtype that can hold them.
  const Tensor src = Tensor::of({0, 1, 2, 3, 100});
  for (Dtype a : kAll)
    for (Dtype b : kAll) {
      INFO(dtype_name(a) << " -> " << dtype_name(b));
      const Tensor x = src.to(a);
      const Tensor y = x.to(b);
      CHECK(y.dtype() == b);
      const bool to_bool = a == kBool || b == kBool;
      const std::vector<double> expect = to_bool ? std::vector<double>{0, 1, 1, 1, 1} : src.to_vector();
      CHECK(y.to_vector() == expect);
      CHECK_FALSE(y.requires_grad());
    }
  // Truncation toward zero (torch.tensor([-2.7, 2.7, -0.5]).to(torch.int64) == [-2, 2, 0]).
  CHECK(Tensor::of({-2.7, 2.7, -0.5}).to(kInt64).to_vector() == std::vector<double>{-2, 2, 0});
  CHECK(Tensor::of({-2.7, 2.7, -0.5}, kFloat64).to(kInt32).to_vector() == std::vector<double>{-2, 2, 0});
  // -> bool is != 0; NaN is true.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(Tensor::of({0.0, -0.0, 0.25, nan}).to(kBool).to_vector() == std::vector<double>{0, 0, 1, 1});
  // Out of range and NaN: the int type's minimum (x86, and torch on it), never undefined behaviour.
  const Tensor wild = Tensor::of({nan, 1e30, -1e30}, kFloat64);
  CHECK(wild.to(kInt64).data<std::int64_t>()[0] == std::numeric_limits<std::int64_t>::min());
  CHECK(wild.to(kInt32).data<std::int32_t>()[1] == std::numeric_limits<std::int32_t>::min());
  // Integer narrowing keeps the low bits (torch.tensor([257, -1]).to(torch.uint8) == [1, 255]).
  CHECK(Tensor::of({257, -1}, kInt64).to(kUInt8).to_vector() == std::vector<double>{1, 255});
  // Large int64 survive int64 -> int64 copies exactly.
  const std::vector<std::int64_t> big = {(std::int64_t{1} << 62) + 3};
  CHECK(Tensor::from_data<std::int64_t>(big, {1}).clone_data().data<std::int64_t>()[0] == big[0]);
}

TEST_CASE("to() is differentiable between float dtypes only", "[dtype]") {
  Tensor x = Tensor::of({1.5, -2.5}).set_requires_grad();
  const Tensor i = x.to(kInt64);
  CHECK_FALSE(i.requires_grad());
  CHECK(i.grad_fn() == nullptr);
  CHECK(i.to_vector() == std::vector<double>{1, -2});
  const Tensor f = x.to(kFloat64);
  CHECK(f.requires_grad());
  const Tensor back = i.to(kFloat32);
  CHECK_FALSE(back.requires_grad());
}

TEST_CASE("set_requires_grad refuses integer and bool tensors", "[dtype]") {
  for (Dtype d : {kInt64, kInt32, kUInt8, kBool}) {
    INFO(dtype_name(d));
    Tensor t = Tensor::zeros({2, 2}, d);
    require_error([&] { t.set_requires_grad(); },
                  {"set_requires_grad", "only tensors of floating point dtype can require gradients",
                   std::string(dtype_name(d)), ".to(xgrad::kFloat32)"});
    CHECK_FALSE(t.requires_grad());
    t.set_requires_grad(false);  // asking for no grad is fine
  }
}

TEST_CASE("copy_, fill_, clone, bit_equal, allclose and views in integer dtypes", "[dtype]") {
  Tensor a = Tensor::zeros({2, 2}, kInt32);
  a.copy_(Tensor::of({{1.9, -1.9}, {3, 4}}));
  CHECK(a.dtype() == kInt32);
  CHECK(a.to_vector() == std::vector<double>{1, -1, 3, 4});
  Tensor b = Tensor::zeros({3}, kBool);
  b.fill_(2.0);
  CHECK(b.to_vector() == std::vector<double>{1, 1, 1});
  Tensor f = Tensor::zeros({3});
  f.copy_(b);
  CHECK(f.to_vector() == std::vector<double>{1, 1, 1});
  const Tensor c = a.clone_data();
  CHECK(bit_equal(a, c));
  CHECK_FALSE(bit_equal(a, a.to(kInt64)));
  CHECK(allclose(a, c));
  const Tensor v = alias_with_shape(a, {4});
  CHECK(v.dtype() == kInt32);
  CHECK(v.to_vector() == a.to_vector());
  CHECK(a.detach().dtype() == kInt32);
  require_error([&] { a.add_(a); }, {"add_", "int32"});
  require_error([&] { a.mul_(2.0); }, {"mul_", "int32"});
}

TEST_CASE("printing integer and bool tensors like torch", "[dtype]") {
  CHECK(to_string(Tensor::of({1, -2, 3}, kInt64)) == "tensor([1, -2, 3], dtype=int64)");
  CHECK(to_string(Tensor::of({{1, 0}, {0, 1}}, kBool)) ==
        "tensor([[True, False],\n        [False, True]], dtype=bool)");
  CHECK(to_string(Tensor::of({200, 7}, kUInt8)) == "tensor([200, 7], dtype=uint8)");
  CHECK(to_string(Tensor::scalar(5, kInt32)) == "tensor(5, dtype=int32)");
  const std::vector<std::int64_t> big = {std::numeric_limits<std::int64_t>::max()};
  CHECK(to_string(Tensor::from_data<std::int64_t>(big, {1})) == "tensor([9223372036854775807], dtype=int64)");
  CHECK(to_string(Tensor::arange(0, 20, 1, kInt64)) ==
        "tensor([0, 1, 2, 3, 4, 5, ..., 14, 15, 16, 17, 18, 19], dtype=int64)");
}

TEST_CASE("xtensor interop in the integer and bool dtypes", "[dtype]") {
  const xt::xarray<std::int64_t> a = {{1, -2}, {3, (std::int64_t{1} << 60) + 1}};
  const Tensor t = from_xtensor(a);
  CHECK(t.dtype() == kInt64);
  CHECK(t.shape() == Shape{2, 2});
  CHECK(t.data<std::int64_t>()[3] == (std::int64_t{1} << 60) + 1);
  CHECK((to_xarray<std::int64_t>(t) == a));
  const xt::xarray<bool> m = {true, false, true};
  const Tensor tm = from_xtensor(m);
  CHECK(tm.dtype() == kBool);
  CHECK((to_xarray<bool>(tm) == m));
  CHECK(from_xtensor(xt::xarray<std::uint8_t>{7, 255}).dtype() == kUInt8);
  Tensor i32 = Tensor::of({4, 5}, kInt32);
  auto view = as_xtensor<std::int32_t>(i32);
  view(1) = 9;
  CHECK(i32.to_vector() == std::vector<double>{4, 9});
  // Converting copies follow to(): float -> int truncates.
  CHECK((to_xarray<std::int32_t>(Tensor::of({-1.5, 2.5})) == xt::xarray<std::int32_t>{-1, 2}));
}
