// Printing modules: each layer's extra_repr, the module tree (operator<<) and summary(), in one
// place so that the formats stay alike. The strings follow PyTorch's reprs where torch has the
// layer ("Linear(in_features=4, out_features=8, bias=True)", booleans as True/False).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <sstream>
#include <string>

#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/block_sparse_linear.hpp"
#include "xgrad/nn/conv.hpp"
#include "xgrad/nn/dropout.hpp"
#include "xgrad/nn/embedding.hpp"
#include "xgrad/nn/graph.hpp"
#include "xgrad/nn/layer_norm.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/nn/normalization.hpp"
#include "xgrad/nn/pool.hpp"
#include "xgrad/nn/resample_conv.hpp"
#include "xgrad/nn/rnn.hpp"

namespace xgrad::nn {

namespace {
const char* py_bool(bool b) { return b ? "True" : "False"; }

// torch's tuple repr of a shape: (64,) or (2, 3).
std::string py_tuple(const Shape& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// Python's repr of a float: the shortest round-trip digits, with ".0" when they read as an integer.
std::string py_float(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // not 1e+16, inf or nan
  return s;
}

// A number that torch's defaults give as a Python int (Softplus's beta=1, threshold=20): whole
// numbers print without ".0".
std::string py_number(double v) {
  return std::isfinite(v) && v == std::trunc(v) && std::abs(v) < 1e16 ? fmt::format("{}", static_cast<long long>(v))
                                                                      : py_float(v);
}

// torch's _addindent: every line after the first indented by `spaces`.
std::string add_indent(const std::string& s, int spaces) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '\n') out.append(static_cast<std::size_t>(spaces), ' ');
  }
  return out;
}

std::string repr(const Module& m) {
  const std::string extra = m.extra_repr();
  const auto children = m.named_children();
  if (children.empty()) return m.type_name() + "(" + extra + ")";
  std::string out = m.type_name() + "(";
  if (!extra.empty()) out += "\n  " + add_indent(extra, 2);
  for (const auto& [name, child] : children) out += "\n  (" + name + "): " + add_indent(repr(*child), 2);
  return out + "\n)";
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Module& module) { return os << repr(module); }

std::string summary(Module& module) {
  struct Row {
    std::string name, type;
    std::int64_t params, trainable;
    std::size_t bytes;
  };
  std::vector<Row> rows;
  for (const auto& [name, m] : module.named_modules()) {
    Row r{name.empty() ? "(root)" : name, m->type_name(), 0, 0, 0};
    for (const auto& p : m->parameters()) {
      r.params += p.numel();
      r.trainable += p.requires_grad() ? p.numel() : 0;
      r.bytes += p.nbytes();
    }
    rows.push_back(std::move(r));
  }
  std::size_t wn = 6, wt = 4;
  for (const auto& r : rows) {
    wn = std::max(wn, r.name.size());
    wt = std::max(wt, r.type.size());
  }
  std::string out = fmt::format("{:<{}}  {:<{}}  {:>14}  {:>14}  {:>14}\n", "module", wn, "type", wt, "parameters",
                                "trainable", "bytes");
  out += std::string(wn + wt + 52, '-') + "\n";
  for (const auto& r : rows)
    out +=
        fmt::format("{:<{}}  {:<{}}  {:>14}  {:>14}  {:>14}\n", r.name, wn, r.type, wt, r.params, r.trainable, r.bytes);
  out += std::string(wn + wt + 52, '-') + "\n";
  std::size_t buffer_bytes = 0;
  for (const auto& b : module.buffers())
    if (b.defined()) buffer_bytes += b.nbytes();
  out += fmt::format("total parameters: {}, trainable: {}\nparameter bytes: {}, buffer bytes: {}\n", rows[0].params,
                     rows[0].trainable, rows[0].bytes, buffer_bytes);
  return out;
}

// ---- each layer's settings ----------------------------------------------------------------------

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features_, out_features_, py_bool(bias_.defined()));
}

std::string Embedding::extra_repr() const { return fmt::format("{}, {}", num_embeddings(), embedding_dim()); }

std::string Dropout::extra_repr() const { return fmt::format("p={}, inplace=False", p_); }

std::string LayerNorm::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine={}", py_tuple(normalized_shape_), eps_,
                     py_bool(weight_.defined()));
}

std::string BatchNormBase::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features_, eps_,
                     momentum_ ? fmt::format("{}", *momentum_) : std::string("None"), py_bool(affine()),
                     py_bool(track_running_stats()));
}

std::string GroupNorm::extra_repr() const {
  return fmt::format("{}, {}, eps={}, affine={}", num_groups_, num_channels_, eps_, py_bool(weight_.defined()));
}

std::string Softmax::extra_repr() const { return fmt::format("dim={}", dim_); }
std::string LogSoftmax::extra_repr() const { return fmt::format("dim={}", dim_); }
std::string GELU::extra_repr() const { return fmt::format("approximate='{}'", approximate_); }
std::string Softplus::extra_repr() const {
  return fmt::format("beta={}, threshold={}", py_number(beta_), py_number(threshold_));
}
std::string LeakyReLU::extra_repr() const { return "negative_slope=" + py_float(negative_slope_); }
std::string ELU::extra_repr() const { return "alpha=" + py_float(alpha_); }
std::string Hardtanh::extra_repr() const {
  return fmt::format("min_val={}, max_val={}", py_float(min_val_), py_float(max_val_));
}
std::string Flatten::extra_repr() const { return fmt::format("start_dim={}, end_dim={}", start_dim_, end_dim_); }

// Convolution and pooling (nn/conv.hpp, nn/pool.hpp): torch's _ConvNd.extra_repr prints tuples and only
// the settings that differ from their defaults; the pooling layers print their arguments as given (one
// value as a number, several as a tuple), except AvgPool1d, which always prints 1-tuples.
namespace {
std::string py_arg(const std::vector<std::int64_t>& v) {
  return v.size() == 1 ? std::to_string(v[0]) : py_tuple(Shape(v.begin(), v.end()));
}
std::string py_vec(const std::vector<std::int64_t>& v) { return py_tuple(Shape(v.begin(), v.end())); }
bool all_equal(const std::vector<std::int64_t>& v, std::int64_t x) {
  return std::all_of(v.begin(), v.end(), [x](std::int64_t e) { return e == x; });
}
}  // namespace

std::string ConvBase::extra_repr() const {
  const ConvOptions& o = options_;
  std::string s = fmt::format("{}, {}, kernel_size={}, stride={}", o.in_channels(), o.out_channels(), py_vec(kernel_),
                              py_vec(stride_));
  if (!o.padding().mode.empty())
    s += ", padding=" + o.padding().mode;
  else if (!all_equal(padding_, 0))
    s += ", padding=" + py_vec(padding_);
  if (!all_equal(dilation_, 1)) s += ", dilation=" + py_vec(dilation_);
  if (transposed_ && !all_equal(output_padding_, 0)) s += ", output_padding=" + py_vec(output_padding_);
  if (o.groups() != 1) s += fmt::format(", groups={}", o.groups());
  if (!bias_.defined()) s += ", bias=False";
  if (o.padding_mode() != "zeros") s += ", padding_mode=" + o.padding_mode();
  return s;
}

std::string MaxPool1d::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}", py_arg(kernel_size_),
                     py_arg(stride_), py_arg(padding_), py_arg(dilation_), py_bool(ceil_mode_));
}
std::string MaxPool2d::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}", py_arg(kernel_size_),
                     py_arg(stride_), py_arg(padding_), py_arg(dilation_), py_bool(ceil_mode_));
}
std::string AvgPool1d::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}", py_vec(kernel_size_), py_vec(stride_), py_vec(padding_));
}
std::string AvgPool2d::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}", py_arg(kernel_size_), py_arg(stride_), py_arg(padding_));
}
std::string AdaptiveAvgPool1d::extra_repr() const { return "output_size=" + py_arg(output_size_); }
std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + py_arg(output_size_); }

std::string BlockSparseLinear::extra_repr() const {
  const double dense = static_cast<double>(pattern_.in_features()) * static_cast<double>(pattern_.out_features());
  return fmt::format("in_features={}, out_features={}, blocks={}, density={:.4g}, bias={}", pattern_.in_features(),
                     pattern_.out_features(), pattern_.num_blocks(),
                     dense > 0 ? static_cast<double>(pattern_.stored_elements()) / dense : 0.0,
                     py_bool(bias_.defined()));
}

std::string ResampleConv::extra_repr() const {
  return fmt::format("rows={}, coarse_points={}, fine_points={}, fine_grid={}, response={}, learn_shift={}",
                     coarse_.size(0), coarse_.size(1), grid_.size(), grid_.is_uniform() ? "uniform" : "points",
                     response_.spec(), py_bool(shift_.defined()));
}

// torch's RNNCellBase and RNNBase extra_repr: the sizes, then only the settings off their defaults.
std::string LSTMCell::extra_repr() const {
  return fmt::format("{}, {}{}", input_size_, hidden_size_, b_ih_.defined() ? "" : ", bias=False");
}

std::string GRUCell::extra_repr() const {
  return fmt::format("{}, {}{}", input_size_, hidden_size_, b_ih_.defined() ? "" : ", bias=False");
}

std::string RNNBase::extra_repr() const {
  std::string s = fmt::format("{}, {}", input_size_, hidden_size_);
  if (num_layers_ != 1) s += fmt::format(", num_layers={}", num_layers_);
  if (!bias_) s += ", bias=False";
  if (batch_first_) s += ", batch_first=True";
  if (dropout_ != 0) s += ", dropout=" + py_float(dropout_);
  if (bidirectional_) s += ", bidirectional=True";
  return s;
}

// PyG's reprs: the channels, then SAGEConv's aggregation and GATConv's heads.
std::string GCNConv::extra_repr() const { return fmt::format("{}, {}", in_, out_); }
std::string GraphConv::extra_repr() const { return fmt::format("{}, {}", in_, out_); }

std::string SAGEConv::extra_repr() const {
  constexpr const char* names[] = {"mean", "sum", "max"};
  std::string s = fmt::format("{}, {}, aggr={}", in_, out_, names[static_cast<int>(aggr_)]);
  if (direction_ == graph::Direction::out) s += ", direction=out";
  if (direction_ == graph::Direction::both) s += ", direction=both";
  return s;
}

std::string GATConv::extra_repr() const { return fmt::format("{}, {}, heads={}", in_, out_, heads_); }

}  // namespace xgrad::nn
