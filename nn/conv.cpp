#include "xgrad/nn/conv.hpp"

#include <cmath>
#include <memory>
#include <utility>

#include "xgrad/core/checked.hpp"
#include "xgrad/nn/init.hpp"

namespace xgrad::nn {

namespace {
std::vector<std::int64_t> expand(const char* layer, const char* arg, const std::vector<std::int64_t>& v,
                                 std::size_t dims) {
  XGRAD_CHECK(v.size() == 1 || v.size() == dims, "{}: option '{}' must have 1 or {} values, got {}", layer, arg, dims,
              v.size());
  return v.size() == 1 ? std::vector<std::int64_t>(dims, v[0]) : v;
}
}  // namespace

ConvBase::ConvBase(const char* name, std::size_t dims, bool transposed, ConvOptions options, Generator& gen)
    : UnaryModule(name), options_(std::move(options)), transposed_(transposed) {
  const ConvOptions& o = options_;
  const std::int64_t in = o.in_channels(), out = o.out_channels(), groups = o.groups();
  XGRAD_CHECK(in >= 0 && out >= 0, "{}: in_channels and out_channels must be >= 0, got in = {}, out = {}", name, in,
              out);
  XGRAD_CHECK(groups >= 1 && in % groups == 0 && out % groups == 0,
              "{}: groups = {} must be positive and divide in_channels = {} and out_channels = {}", name, groups, in,
              out);
  XGRAD_CHECK(o.padding_mode() == "zeros",
              "{}: padding_mode '{}' is not supported (only 'zeros'; torch also has 'reflect', 'replicate', "
              "'circular')",
              name, o.padding_mode());
  kernel_ = expand(name, "kernel_size", o.kernel_size(), dims);
  stride_ = expand(name, "stride", o.stride(), dims);
  dilation_ = expand(name, "dilation", o.dilation(), dims);
  output_padding_ = expand(name, "output_padding", o.output_padding(), dims);
  for (auto k : kernel_) XGRAD_CHECK(k >= 1, "{}: kernel_size must be positive, got {}", name, k);
  if (o.padding().mode.empty()) {
    padding_ = expand(name, "padding", o.padding().values, dims);
  } else {
    XGRAD_CHECK(!transposed, "{}: padding must be numbers, got \"{}\"", name, o.padding().mode);
    XGRAD_CHECK(o.padding().mode == "same" || o.padding().mode == "valid",
                "{}: padding must be \"same\", \"valid\" or numbers, got \"{}\"", name, o.padding().mode);
    if (o.padding().mode == "same")
      for (auto s : stride_)
        XGRAD_CHECK(s == 1, "{}: padding \"same\" is not supported for strided convolutions (stride {})", name, s);
  }
  Shape ws = transposed ? Shape{in, out / groups} : Shape{out, in / groups};
  ws.insert(ws.end(), kernel_.begin(), kernel_.end());
  checked_nbytes(checked_numel(ws, name, "weight"), dtype_size(o.dtype()), name, "weight");
  // torch's _ConvNd.reset_parameters
  Tensor w = Tensor::empty(ws, o.dtype());
  if (w.numel() > 0) init::kaiming_uniform_(w, gen, std::sqrt(5.0));
  weight_ = register_parameter("weight", w);
  if (o.bias()) {
    const std::int64_t fan_in = w.numel() > 0 ? init::calculate_fan_in_and_fan_out(w, name).first : 0;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    Tensor b = Tensor::empty({out}, o.dtype());
    init::uniform_(b, gen, -bound, bound);
    bias_ = register_parameter("bias", b);
  }
}

Conv1d::Conv1d(const ConvOptions& options, Generator& gen) : ConvBase("Conv1d", 1, false, options, gen) {}
Conv1d::Conv1d(const ConvOptions& options, std::uint64_t seed)
    : ConvBase("Conv1d", 1, false, options, *std::make_unique<Generator>(seed)) {}
Tensor Conv1d::forward(const Tensor& x) {
  return conv1d(x, weight_, bias_, options_.stride(), options_.padding(), options_.dilation(), options_.groups());
}

Conv2d::Conv2d(const ConvOptions& options, Generator& gen) : ConvBase("Conv2d", 2, false, options, gen) {}
Conv2d::Conv2d(const ConvOptions& options, std::uint64_t seed)
    : ConvBase("Conv2d", 2, false, options, *std::make_unique<Generator>(seed)) {}
Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight_, bias_, options_.stride(), options_.padding(), options_.dilation(), options_.groups());
}

ConvTranspose2d::ConvTranspose2d(const ConvOptions& options, Generator& gen)
    : ConvBase("ConvTranspose2d", 2, true, options, gen) {}
ConvTranspose2d::ConvTranspose2d(const ConvOptions& options, std::uint64_t seed)
    : ConvBase("ConvTranspose2d", 2, true, options, *std::make_unique<Generator>(seed)) {}
Tensor ConvTranspose2d::forward(const Tensor& x) {
  return conv_transpose2d(x, weight_, bias_, options_.stride(), padding_, output_padding_, options_.groups(),
                          options_.dilation());
}

}  // namespace xgrad::nn
