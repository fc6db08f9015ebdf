#include "xgrad/nn/conv.hpp"

#include <cmath>
#include <memory>
#include <utility>

#include "xgrad/core/checked.hpp"
#include "xgrad/nn/init.hpp"
#include "xgrad/ops/shape_ops.hpp"

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
  const std::string& mode = o.padding_mode();
  XGRAD_CHECK(mode == "zeros" || mode == "reflect" || mode == "replicate" || mode == "circular",
              "{}: padding_mode must be one of 'zeros', 'reflect', 'replicate', 'circular', got '{}'", name, mode);
  XGRAD_CHECK(!transposed || mode == "zeros", "{}: only padding_mode 'zeros' is supported, got '{}'", name, mode);
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
  if (mode != "zeros") {  // torch's _reversed_padding_repeated_twice: (left, right) from the last dim
    for (std::size_t d = dims; d-- > 0;) {
      std::int64_t left = 0, right = 0;
      if (o.padding().mode.empty()) {
        left = right = padding_[d];
      } else if (o.padding().mode == "same") {
        const std::int64_t total = dilation_[d] * (kernel_[d] - 1);
        left = total / 2;
        right = total - left;
      }
      pad_.push_back(left);
      pad_.push_back(right);
    }
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

Tensor ConvBase::pad_input(const Tensor& x) const {
  const std::string& mode = options_.padding_mode();
  if (mode == "zeros") return x;
  XGRAD_CHECK(x.defined(), "{}: input is undefined", type_name());
  if (mode != "circular") return pad(x, pad_, mode);
  // Circular: the last `left` elements wrap to the front and the first `right` to the back, per dim.
  Tensor y = x;
  const std::int64_t rank = x.dim();
  for (std::size_t i = 0; i * 2 < pad_.size(); ++i) {
    const std::int64_t dim = rank - 1 - static_cast<std::int64_t>(i), left = pad_[2 * i], right = pad_[2 * i + 1];
    XGRAD_CHECK(dim >= 0, "{}: input of shape {} has too few dimensions", type_name(), shape_str(x.shape()));
    const std::int64_t n = y.size(dim);
    XGRAD_CHECK(left <= n && right <= n,
                "{}: padding_mode 'circular' needs each padding <= the input's size, got padding ({}, {}) for a "
                "dimension of size {} (input {})",
                type_name(), left, right, n, shape_str(x.shape()));
    if (left == 0 && right == 0) continue;
    y = cat({slice(y, dim, n - left, n), y, slice(y, dim, 0, right)}, dim);
  }
  return y;
}

ConvPadding ConvBase::op_padding() const {
  if (options_.padding_mode() == "zeros") return options_.padding();
  return 0;
}

Conv1d::Conv1d(const ConvOptions& options, Generator& gen) : ConvBase("Conv1d", 1, false, options, gen) {}
Conv1d::Conv1d(const ConvOptions& options, std::optional<std::uint64_t> seed)
    : ConvBase("Conv1d", 1, false, options, SeedOrDefault(seed)) {}
Tensor Conv1d::forward(const Tensor& x) {
  return conv1d(pad_input(x), weight_, bias_, options_.stride(), op_padding(), options_.dilation(), options_.groups());
}

Conv2d::Conv2d(const ConvOptions& options, Generator& gen) : ConvBase("Conv2d", 2, false, options, gen) {}
Conv2d::Conv2d(const ConvOptions& options, std::optional<std::uint64_t> seed)
    : ConvBase("Conv2d", 2, false, options, SeedOrDefault(seed)) {}
Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(pad_input(x), weight_, bias_, options_.stride(), op_padding(), options_.dilation(), options_.groups());
}

ConvTranspose1d::ConvTranspose1d(const ConvOptions& options, Generator& gen)
    : ConvBase("ConvTranspose1d", 1, true, options, gen) {}
ConvTranspose1d::ConvTranspose1d(const ConvOptions& options, std::optional<std::uint64_t> seed)
    : ConvBase("ConvTranspose1d", 1, true, options, SeedOrDefault(seed)) {}
Tensor ConvTranspose1d::forward(const Tensor& x) {
  return conv_transpose1d(x, weight_, bias_, options_.stride(), padding_, output_padding_, options_.groups(),
                          options_.dilation());
}

ConvTranspose2d::ConvTranspose2d(const ConvOptions& options, Generator& gen)
    : ConvBase("ConvTranspose2d", 2, true, options, gen) {}
ConvTranspose2d::ConvTranspose2d(const ConvOptions& options, std::optional<std::uint64_t> seed)
    : ConvBase("ConvTranspose2d", 2, true, options, SeedOrDefault(seed)) {}
Tensor ConvTranspose2d::forward(const Tensor& x) {
  return conv_transpose2d(x, weight_, bias_, options_.stride(), padding_, output_padding_, options_.groups(),
                          options_.dilation());
}

}  // namespace xgrad::nn
