// Tests for nn/module.* and nn/sequential.*: dotted names of nested modules, named_modules,
// to(dtype) converting in place what layers hold, train/eval propagation, user-defined modules,
// Sequential (naming, indexing, Functional, nesting), 1-vs-2-thread determinism, bad inputs.
#include <memory>
#include <sstream>

#include "support.hpp"
#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/attention.hpp"
#include "xgrad/nn/conv.hpp"
#include "xgrad/nn/dropout.hpp"
#include "xgrad/nn/embedding.hpp"
#include "xgrad/nn/layer_norm.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/nn/normalization.hpp"
#include "xgrad/nn/pool.hpp"
#include "xgrad/nn/sequential.hpp"
#include "xgrad/ops/elementwise.hpp"
#include "xgrad/ops/reduction.hpp"
#include "xgrad/ops/softmax.hpp"

using namespace xgrad;

namespace {
// A user module in the style of the C++ frontend: children registered in the constructor, its own forward.
struct Encoder : nn::UnaryModule {
  std::shared_ptr<nn::Sequential> body;
  std::shared_ptr<nn::LayerNorm> norm;
  Tensor scale;
  Encoder() : UnaryModule("Encoder") {
    body = register_module("body",
                           std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
                               std::make_shared<nn::Linear>(3, 4, true, kFloat32, 1), std::make_shared<nn::Tanh>(),
                               std::make_shared<nn::Dropout>(0.5, 7)}));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(Shape{4}));
    scale = register_parameter("scale", Tensor::ones({4}));
    register_buffer("steps", Tensor::zeros({1}));
  }
  Tensor forward(const Tensor& x) override { return mul((*norm)((*body)(x)), scale); }
};

std::vector<std::string> names(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [n, t] : named) out.push_back(n);
  return out;
}
}  // namespace

TEST_CASE("Module: nested modules have dotted names", "[module]") {
  nn::Sequential net({std::make_shared<Encoder>(), std::make_shared<nn::Linear>(4, 2)});
  CHECK(names(net.named_parameters()) == std::vector<std::string>{"0.scale", "0.body.0.weight", "0.body.0.bias",
                                                                  "0.norm.weight", "0.norm.bias", "1.weight",
                                                                  "1.bias"});
  CHECK(names(net.named_parameters(/*recurse=*/false)).empty());
  CHECK(names(net.named_buffers()) == std::vector<std::string>{"0.steps"});
  CHECK(net.parameters().size() == 7);
  CHECK(net.num_parameters() == 4 + (12 + 4) + (4 + 4) + (8 + 2));
  CHECK(net.parameter_bytes() == std::size_t(net.num_parameters()) * 4);

  std::vector<std::string> module_names;
  std::vector<std::string> types;
  for (const auto& [n, m] : net.named_modules()) {
    module_names.push_back(n);
    types.push_back(m->type_name());
  }
  CHECK(module_names == std::vector<std::string>{"", "0", "0.body", "0.body.0", "0.body.1", "0.body.2", "0.norm", "1"});
  CHECK(types == std::vector<std::string>{"Sequential", "Encoder", "Sequential", "Linear", "Tanh", "Dropout",
                                          "LayerNorm", "Linear"});
  CHECK(net.named_modules("net", false).front().first == "net.0");
  CHECK(net.modules(false).size() == 7);
  CHECK(net.children().size() == 2);

  // The handles a layer holds are the registered parameters themselves.
  auto fc = net.at<nn::Linear>(1);
  CHECK(net.named_parameters()[5].second.is_same(fc->weight()));
  CHECK(fc->weight().requires_grad());
  CHECK(fc->weight().shape() == Shape{2, 4});
}

TEST_CASE("Module: to(dtype) converts in place what layers hold", "[module][dtype]") {
  auto enc = std::make_shared<Encoder>();
  auto fc = enc->body->at<nn::Linear>(0);
  const Tensor w_before = fc->weight().clone_data();
  CHECK(enc->dtype() == kFloat32);

  // Accumulate a gradient first: to() converts it too.
  sum((*enc)(Tensor::ones({2, 3}))).backward();
  REQUIRE(fc->weight().grad().defined());
  const Tensor g_before = fc->weight().grad().clone_data();

  CHECK(&enc->to(kFloat64) == enc.get());
  CHECK(enc->dtype() == kFloat64);
  for (const auto& [n, t] : enc->named_parameters()) {
    INFO(n);
    CHECK(t.dtype() == kFloat64);
    CHECK(t.requires_grad());
    CHECK(t.is_leaf());
  }
  for (const auto& [n, t] : enc->named_buffers()) CHECK(t.dtype() == kFloat64);
  CHECK(fc->weight().dtype() == kFloat64);
  CHECK(enc->norm->weight().dtype() == kFloat64);
  CHECK(enc->scale.dtype() == kFloat64);
  CHECK(fc->weight().is_same(enc->named_parameters()[1].second));
  CHECK(fc->weight().to_vector() == w_before.to_vector());  // float32 -> float64 is exact
  CHECK(fc->weight().grad().dtype() == kFloat64);
  CHECK(fc->weight().grad().to_vector() == g_before.to_vector());

  // The converted module runs in float64 and its gradients reach the same handles.
  enc->zero_grad();
  CHECK_FALSE(fc->weight().grad().defined());
  const Tensor y = (*enc)(Tensor::ones({2, 3}, kFloat64));
  CHECK(y.dtype() == kFloat64);
  sum(y).backward();
  CHECK(fc->weight().grad().dtype() == kFloat64);
  CHECK(fc->weight().grad().shape() == Shape{4, 3});

  // And back to float32 (values rounded); converting to the same dtype changes nothing.
  enc->to(kFloat32);
  CHECK(fc->weight().dtype() == kFloat32);
  CHECK(bit_equal(fc->weight().detach(), w_before));
  const auto storage = fc->weight().impl()->storage;
  enc->to(kFloat32);
  CHECK(fc->weight().impl()->storage == storage);
}

TEST_CASE("Module: to(dtype) keeps tied weights tied", "[module][dtype]") {
  // An output layer that shares the embedding's weight (weight tying), in one parent module.
  struct Tied : nn::Module {
    std::shared_ptr<nn::Embedding> emb;
    std::shared_ptr<nn::Linear> out;
    Tied() : Module("Tied") {
      emb = register_module("emb", std::make_shared<nn::Embedding>(5, 3));
      out = register_module("out", std::make_shared<nn::Linear>(emb->weight()));
    }
  } tied;
  CHECK(tied.emb->weight().is_same(tied.out->weight()));
  tied.to(kFloat64);
  CHECK(tied.emb->weight().dtype() == kFloat64);
  CHECK(tied.out->weight().is_same(tied.emb->weight()));
  sum((*tied.out)((*tied.emb)({1, 2}))).backward();
  CHECK(tied.emb->weight().grad().dtype() == kFloat64);
}

TEST_CASE("Module: a graph recorded before to(dtype) refuses to backpropagate", "[module][dtype]") {
  nn::Linear fc(3, 2, true, kFloat32, 5);
  // mul saves the weight itself (a leaf); after the conversion its storage version has moved on.
  const Tensor w_sq = sum(mul(fc.weight(), fc.weight()));
  fc.to(kFloat64);
  test::require_error([&] { w_sq.backward(); }, {"mul"});
}

TEST_CASE("Module: train/eval propagate to every descendant", "[module]") {
  auto enc = std::make_shared<Encoder>();
  nn::Sequential net({enc, std::make_shared<nn::ReLU>()});
  CHECK(net.is_training());
  net.eval();
  for (const auto& m : net.modules()) CHECK_FALSE(m->is_training());
  // In eval mode the Dropout inside is the identity: two forwards agree.
  const Tensor x = Tensor::ones({2, 3});
  CHECK(bit_equal(net(x), net(x)));
  net.train();
  for (const auto& m : net.modules()) CHECK(m->is_training());
  enc->body->train(false);
  CHECK(net.is_training());
  CHECK_FALSE(enc->body->at<nn::Dropout>(2)->is_training());
}

TEST_CASE("Sequential: chains modules, names them by position, indexes them", "[module][sequential]") {
  auto fc1 = std::make_shared<nn::Linear>(4, 8, true, kFloat64, 1);
  auto fc2 = std::make_shared<nn::Linear>(8, 2, true, kFloat64, 2);
  nn::Sequential net({fc1, std::make_shared<nn::ReLU>()});
  net.push_back(fc2);
  net.push_back([](const Tensor& t) { return mul(t, 2.0); });
  net.push_back("head", std::make_shared<nn::LogSoftmax>(-1));
  REQUIRE(net.size() == 5);
  CHECK(net[0] == fc1);
  CHECK(net.at<nn::Linear>(2) == fc2);
  CHECK(net[3]->type_name() == "Functional");
  CHECK(names(net.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(net.named_children().back().first == "head");

  Generator gen(3);
  const Tensor x = Tensor::randn({5, 4}, gen, kFloat64);
  const Tensor expected = log_softmax(mul((*fc2)(relu((*fc1)(x))), 2.0), -1);
  CHECK(bit_equal(net(x), expected));
  CHECK(bit_equal(net.forward(x), expected));

  nn::Sequential empty;
  CHECK(empty.empty());
  CHECK(empty(x).is_same(x));

  std::size_t count = 0;
  for (const auto& m : net) count += m != nullptr;
  CHECK(count == 5);
}

TEST_CASE("Sequential: libtorch's spelling, module objects and shared_ptrs mixed", "[module][sequential]") {
  // nn::Sequential(nn::Linear(4, 8), nn::ReLU()) as in libtorch: each temporary is moved into a
  // std::shared_ptr of its own type.
  nn::Sequential net(nn::Linear(4, 8, true, kFloat64, 1), nn::ReLU(), nn::Linear(8, 2, true, kFloat64, 2));
  REQUIRE(net.size() == 3);
  CHECK(net.at<nn::Linear>(0)->type_name() == "Linear");
  CHECK(net[1]->type_name() == "ReLU");
  CHECK(names(net.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(net.parameters().size() == 4);
  CHECK(net.num_parameters() == 4 * 8 + 8 + 8 * 2 + 2);
  // The moved layer's handles and the registry are still one TensorImpl (Note [Moved modules]).
  const auto fc1 = net.at<nn::Linear>(0);
  CHECK(fc1->weight().is_same(net.named_parameters()[0].second));
  CHECK(fc1->bias().is_same(net.named_parameters()[1].second));

  // The same values as the layers built in their shared_ptrs with the same seeds.
  const auto ref1 = std::make_shared<nn::Linear>(4, 8, true, kFloat64, 1);
  const auto ref2 = std::make_shared<nn::Linear>(8, 2, true, kFloat64, 2);
  Generator gen(5);
  const Tensor x = Tensor::randn({3, 4}, gen, kFloat64);
  CHECK(bit_equal(net(x), (*ref2)(relu((*ref1)(x)))));
  Tensor loss = sum(net(x));
  loss.backward();
  for (const Tensor& p : net.parameters()) CHECK(p.grad().defined());

  // Mixed: a shared_ptr kept by the caller, a temporary, and a nested Sequential.
  auto head = std::make_shared<nn::Linear>(8, 1, true, kFloat64, 3);
  nn::Sequential mixed(nn::Sequential(nn::Linear(4, 8, true, kFloat64, 1), nn::Tanh()), head, nn::Sigmoid());
  REQUIRE(mixed.size() == 3);
  CHECK(mixed[1] == head);
  CHECK(names(mixed.named_parameters()) == std::vector<std::string>{"0.0.weight", "0.0.bias", "1.weight", "1.bias"});
  CHECK(mixed(x).shape() == Shape{3, 1});

  // push_back by value, with or without a name.
  nn::Sequential grown;
  grown.push_back(nn::Linear(4, 8, true, kFloat64, 1));
  grown.push_back(nn::ReLU());
  grown.push_back("out", nn::Linear(8, 2, true, kFloat64, 2));
  CHECK(names(grown.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "out.weight", "out.bias"});
  CHECK(bit_equal(grown(x), net(x)));
  test::require_error([&] { grown.push_back("out", nn::ReLU()); }, {"out"});

  // The braced list of shared_ptrs and a single shared_ptr still work.
  nn::Sequential one(std::make_shared<nn::Tanh>());
  CHECK(one.size() == 1);
  nn::Sequential listed({std::make_shared<nn::Tanh>(), std::make_shared<nn::ReLU>()});
  CHECK(listed.size() == 2);
  static_assert(!std::is_constructible_v<nn::Sequential, nn::Linear&>, "an lvalue module cannot be shared");
  static_assert(std::is_constructible_v<nn::Sequential, nn::Linear&&, std::shared_ptr<nn::ReLU>&>);
}

TEST_CASE("Sequential: forward and backward are bit-identical with 1 and 2 threads", "[module][threads]") {
  Generator gen(9);
  const Tensor x0 = Tensor::randn({256, 64}, gen);
  test::require_thread_deterministic([&] {
    nn::Sequential net({std::make_shared<nn::Linear>(64, 128, true, kFloat32, 1), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::LayerNorm>(Shape{128}), std::make_shared<nn::Dropout>(0.25, 4),
                        std::make_shared<nn::Linear>(128, 10, true, kFloat32, 2), std::make_shared<nn::LogSoftmax>(1)});
    Tensor x = x0.clone_data().set_requires_grad();
    Tensor y = net(x);
    sum(mul(y, y)).backward();
    Tensors out{y, x.grad()};
    for (const auto& p : net.parameters()) out.push_back(p.grad());
    return out;
  });
}

TEST_CASE("Module: bad inputs raise xgrad::Error", "[module][errors]") {
  nn::Linear fc(2, 3);
  test::require_error([&] { fc.register_parameter("weight", Tensor::zeros({1})); }, {"Linear", "'weight'", "already"});
  test::require_error([&] { fc.register_buffer("a.b", Tensor::zeros({1})); }, {"Linear", "'a.b'"});
  test::require_error([&] { fc.register_module("w", std::shared_ptr<nn::Module>()); }, {"Linear", "'w'", "null"});

  nn::Sequential net({std::make_shared<nn::ReLU>()});
  test::require_error([&] { net[1]; }, {"Sequential", "index 1", "1 modules"});
  test::require_error([&] { net.at<nn::Linear>(0); }, {"Sequential::at", "ReLU"});
  test::require_error([&] { net.push_back(std::shared_ptr<nn::UnaryModule>()); }, {"Sequential::push_back", "null"});
  test::require_error([&] { net.push_back("0", std::make_shared<nn::Tanh>()); }, {"Sequential", "'0'", "already"});
  CHECK(net.size() == 1);  // nothing was added by the failed calls
  test::require_error([&] { nn::Functional f(nullptr); }, {"Functional", "empty"});

  nn::ReLU relu_module;
  test::require_error([&] { (void)relu_module.dtype(); }, {"ReLU::dtype", "no parameters"});
  struct Mixed : nn::Module {
    Mixed() : Module("Mixed") {
      register_parameter("a", Tensor::zeros({1}));
      register_parameter("b", Tensor::zeros({1}, kFloat64));
    }
  } mixed;
  test::require_error([&] { (void)mixed.dtype(); }, {"Mixed::dtype", "'a' is float32", "'b' is float64"});
}

namespace {
std::string printed(const nn::Module& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}
}  // namespace

TEST_CASE("Module: printing shows the module tree exactly as PyTorch prints it", "[module][repr][parity]") {
  struct Mlp : nn::Module {
    Mlp() : nn::Module("Mlp") {
      register_module("norm", std::make_shared<nn::LayerNorm>(Shape{4}));
      register_module("body", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
                                  std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::Tanh>(),
                                  std::make_shared<nn::Dropout>(0.25), std::make_shared<nn::Linear>(8, 3, false)}));
      register_module("head", std::make_shared<nn::LogSoftmax>(1));
    }
  };
  nn::Sequential seq({std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
                      std::make_shared<nn::Linear>(8, 2, false), std::make_shared<nn::Softmax>(-1)});
  Mlp nested;
  nn::Embedding embedding(10, 3);
  nn::LayerNorm norm2d(Shape{2, 3}, 1e-3, false);
  test::TempDir dir("module_repr");
  test::run_python_script("tests/nn/module_repr.py", dir.path.string());
  CHECK(printed(seq) == test::read_bytes(dir.file("sequential.txt")));
  CHECK(printed(nested) == test::read_bytes(dir.file("nested.txt")));
  CHECK(printed(embedding) == test::read_bytes(dir.file("embedding.txt")));
  CHECK(printed(norm2d) == test::read_bytes(dir.file("layer_norm_2d.txt")));
  CHECK(printed(nn::BatchNorm1d(4, 1e-5, std::nullopt, false)) == test::read_bytes(dir.file("batch_norm_1d.txt")));
  CHECK(printed(nn::BatchNorm2d(3, 1e-3, 0.3, true, false)) == test::read_bytes(dir.file("batch_norm_2d.txt")));
  CHECK(printed(nn::GroupNorm(2, 4, 1e-3, false)) == test::read_bytes(dir.file("group_norm.txt")));
  using V = std::vector<std::int64_t>;
  nn::Sequential conv_pool(
      {std::make_shared<nn::Conv2d>(nn::ConvOptions(1, 32, {3}).padding("same")), std::make_shared<nn::MaxPool2d>(V{2}),
       std::make_shared<nn::AvgPool2d>(V{2, 3}, V{1, 2}, V{1}),
       std::make_shared<nn::Conv2d>(nn::ConvOptions(4, 4, {3, 5}).stride({2, 1}).padding({1, 2}).groups(2).bias(false)),
       std::make_shared<nn::ConvTranspose2d>(nn::ConvOptions(3, 4, {3}).stride({2}).output_padding({1})),
       std::make_shared<nn::ConvTranspose2d>(
           nn::ConvOptions(2, 4, {2, 3}).dilation({2}).groups(2).padding(1).bias(false)),
       std::make_shared<nn::AdaptiveAvgPool2d>(V{1, 1}), std::make_shared<nn::Flatten>()});
  nn::Sequential conv_pool_1d({std::make_shared<nn::Conv1d>(nn::ConvOptions(2, 3, {3}).dilation({2}).bias(false)),
                               std::make_shared<nn::Conv1d>(nn::ConvOptions(3, 3, {2}).padding("valid")),
                               std::make_shared<nn::MaxPool1d>(V{3}, V{2}, V{1}, V{1}, true),
                               std::make_shared<nn::AvgPool1d>(V{3}), std::make_shared<nn::AdaptiveAvgPool1d>(V{4})});
  CHECK(printed(conv_pool) == test::read_bytes(dir.file("conv_pool.txt")));
  CHECK(printed(conv_pool_1d) == test::read_bytes(dir.file("conv_pool_1d.txt")));
  nn::Sequential activations(
      {std::make_shared<nn::GELU>(), std::make_shared<nn::GELU>("tanh"), std::make_shared<nn::SiLU>(),
       std::make_shared<nn::Softplus>(), std::make_shared<nn::Softplus>(2.5, 10.0), std::make_shared<nn::Mish>(),
       std::make_shared<nn::LeakyReLU>(), std::make_shared<nn::LeakyReLU>(0.2), std::make_shared<nn::ELU>(),
       std::make_shared<nn::ELU>(0.5), std::make_shared<nn::SELU>(), std::make_shared<nn::Hardtanh>(),
       std::make_shared<nn::Hardtanh>(-2.0, 0.25), std::make_shared<nn::LogSigmoid>()});
  CHECK(printed(activations) == test::read_bytes(dir.file("activations.txt")));
  nn::TransformerEncoder transformer(
      nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(4, 2).dim_feedforward(8)), 2,
      std::make_shared<nn::LayerNorm>(Shape{4}));
  CHECK(printed(transformer) == test::read_bytes(dir.file("transformer.txt")));
  CHECK(printed(nn::MultiheadAttention(nn::MultiheadAttentionOptions(6, 3).bias(false).kdim(4).vdim(5))) ==
        test::read_bytes(dir.file("mha_kdim_vdim.txt")));
}

TEST_CASE("Module: summary() counts every module's parameters and bytes", "[module][repr]") {
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 2)});
  net->named_parameters()[3].second.set_requires_grad(false);  // "2.bias": frozen
  const std::string s = nn::summary(*net);
  INFO(s);
  // 4*8 + 8 + 8*2 + 2 = 58 parameters, 2 of them frozen, float32.
  CHECK(s.find("total parameters: 58, trainable: 56") != std::string::npos);
  CHECK(s.find("parameter bytes: 232, buffer bytes: 0") != std::string::npos);
  CHECK(s.find("(root)") != std::string::npos);
  CHECK(s.find("Sequential") != std::string::npos);
  // One row per module: the root and its three children, the first Linear with 40 parameters.
  std::istringstream lines(s);
  std::string line;
  int rows_with_linear = 0;
  bool found_first = false;
  while (std::getline(lines, line)) {
    if (line.find("Linear") != std::string::npos) ++rows_with_linear;
    if (line.rfind("0 ", 0) == 0)
      found_first = line.find(" 40 ") != std::string::npos && line.find(" 160") != std::string::npos;
  }
  CHECK(rows_with_linear == 2);
  CHECK(found_first);
}
