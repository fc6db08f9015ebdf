#include "xgrad/nn/data.hpp"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "xgrad/core/error.hpp"
#include "xgrad/core/file_io.hpp"
#include "xgrad/core/npy.hpp"
#include "xgrad/core/random.hpp"

namespace xgrad::nn {

namespace {

Shape tail_shape(const Shape& s) { return Shape(s.begin() + 1, s.end()); }

Shape with_batch(std::size_t batch, const Shape& tail) {
  Shape s{static_cast<std::int64_t>(batch)};
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

// Copies row `i` of a tensor whose first axis has rows of `row_bytes` bytes into `dst`.
void copy_row(const Tensor& src, std::size_t i, std::size_t row_bytes, void* dst) {
  std::memcpy(dst, static_cast<const unsigned char*>(src.raw_data()) + i * row_bytes, row_bytes);
}

Tensor row_copy(const Tensor& t, std::size_t i) {
  Tensor out = Tensor::empty(tail_shape(t.shape()), t.dtype());
  copy_row(t, i, out.nbytes(), out.raw_data());
  return out;
}

// Stacks the tensors of one field (data or target) of a list of examples.
Tensor stack_field(const std::vector<Example>& examples, std::span<const std::size_t> indices, bool target) {
  const auto field = [&](std::size_t k) -> const Tensor& { return target ? examples[k].target : examples[k].data; };
  const char* name = target ? "target" : "data";
  const Tensor& first = field(0);
  for (std::size_t k = 0; k < examples.size(); ++k) {
    const Tensor& t = field(k);
    XGRAD_CHECK(t.defined() == first.defined(), "Dataset::get_batch: example {} has {} {} but example {} has {}",
                indices[k], t.defined() ? "a" : "no", name, indices[0], first.defined() ? "one" : "none");
    if (!t.defined()) continue;
    XGRAD_CHECK(t.shape() == first.shape() && t.dtype() == first.dtype(),
                "Dataset::get_batch: cannot stack {} of example {} (shape {}, {}) with example {} (shape {}, {})", name,
                indices[k], shape_str(t.shape()), t.dtype(), indices[0], shape_str(first.shape()), first.dtype());
  }
  if (!first.defined()) return Tensor();
  Tensor out = Tensor::empty(with_batch(examples.size(), first.shape()), first.dtype());
  const std::size_t row = first.nbytes();
  auto* dst = static_cast<unsigned char*>(out.raw_data());
  for (std::size_t k = 0; k < examples.size(); ++k) std::memcpy(dst + k * row, field(k).raw_data(), row);
  return out;
}

}  // namespace

// ---- Dataset -----------------------------------------------------------------------------------

Example Dataset::get_batch(std::span<const std::size_t> indices) const {
  XGRAD_CHECK(!indices.empty(), "Dataset::get_batch: argument 'indices' is empty");
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (std::size_t i : indices) {
    XGRAD_CHECK(i < size(), "Dataset::get_batch: index {} is out of range for a dataset of size {}", i, size());
    examples.push_back(get(i));
    XGRAD_CHECK(examples.back().data.defined(), "Dataset::get_batch: example {} has undefined data", i);
  }
  return Example{stack_field(examples, indices, false), stack_field(examples, indices, true)};
}

TensorDataset::TensorDataset(Tensor data, Tensor target) : data_(std::move(data)), target_(std::move(target)) {
  XGRAD_CHECK(data_.defined(), "TensorDataset: argument 'data' is undefined");
  XGRAD_CHECK(data_.dim() >= 1,
              "TensorDataset: argument 'data' must have at least 1 dimension (examples), got shape {}",
              shape_str(data_.shape()));
  if (target_.defined()) {
    XGRAD_CHECK(target_.dim() >= 1,
                "TensorDataset: argument 'target' must have at least 1 dimension (examples), got shape {}",
                shape_str(target_.shape()));
    XGRAD_CHECK(target_.size(0) == data_.size(0),
                "TensorDataset: first dimensions differ: data has shape {} ({} examples) but target has shape {} ({})",
                shape_str(data_.shape()), data_.size(0), shape_str(target_.shape()), target_.size(0));
  }
  size_ = static_cast<std::size_t>(data_.size(0));
}

Example TensorDataset::get(std::size_t i) const {
  XGRAD_CHECK(i < size_, "TensorDataset::get: index {} is out of range for a dataset of size {}", i, size_);
  return Example{row_copy(data_, i), target_.defined() ? row_copy(target_, i) : Tensor()};
}

Example TensorDataset::get_batch(std::span<const std::size_t> indices) const {
  XGRAD_CHECK(!indices.empty(), "TensorDataset::get_batch: argument 'indices' is empty");
  for (std::size_t i : indices)
    XGRAD_CHECK(i < size_, "TensorDataset::get_batch: index {} is out of range for a dataset of size {}", i, size_);
  const auto gather = [&](const Tensor& src) {
    Tensor out = Tensor::empty(with_batch(indices.size(), tail_shape(src.shape())), src.dtype());
    const std::size_t row = size_ == 0 ? 0 : src.nbytes() / size_;
    auto* dst = static_cast<unsigned char*>(out.raw_data());
    for (std::size_t k = 0; k < indices.size(); ++k) copy_row(src, indices[k], row, dst + k * row);
    return out;
  };
  return Example{gather(data_), target_.defined() ? gather(target_) : Tensor()};
}

// ---- readers -----------------------------------------------------------------------------------

Tensor read_csv(const std::string& path, const CsvOptions& options) {
  const char d = options.delimiter;
  XGRAD_CHECK(d != '\n' && d != '\r' && d != '.' && d != '-' && d != '+' && !(d >= '0' && d <= '9'),
              "read_csv: option 'delimiter' (character code {}) cannot separate numbers", static_cast<int>(d));
  const std::string text = read_regular_file(path, "read_csv");

  // Integer dtypes: each field must be an integer in the dtype's range ("7", "-3", also "7.0" or
  // "1e3"), read exactly (int64 values beyond 2^53 too); "1.5" is refused, not truncated.
  const bool integral = !is_floating_point(options.dtype);
  std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
  if (options.dtype == kInt32) {
    lo = std::numeric_limits<std::int32_t>::min();
    hi = std::numeric_limits<std::int32_t>::max();
  } else if (options.dtype == kUInt8) {
    lo = 0;
    hi = 255;
  } else if (options.dtype == kBool) {
    lo = 0;
    hi = 1;
  }
  std::vector<double> values;
  std::vector<std::int64_t> ints;
  std::size_t columns = 0, rows = 0, first_row_line = 0;
  bool header_pending = options.header;
  std::size_t line_no = 0, pos = 0;
  const auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bool blank = true;
    for (char c : line) blank = blank && is_space(c);
    if (blank) continue;
    if (header_pending) {
      header_pending = false;
      continue;
    }
    std::size_t fields = 0, start = 0;
    while (true) {
      std::size_t stop = line.find(options.delimiter, start);
      if (stop == std::string_view::npos) stop = line.size();
      std::size_t a = start, b = stop;
      while (a < b && is_space(line[a])) ++a;
      while (b > a && is_space(line[b - 1])) --b;
      const std::size_t column = (a < b ? a : start) + 1;
      const std::string_view field = line.substr(a, b - a);
      XGRAD_CHECK(!field.empty(), "read_csv: {}:{}:{}: field {} is empty", path, line_no, column, fields + 1);
      // from_chars rejects a leading '+', which CSV writers do emit.
      std::string_view digits = field;
      if (digits.size() > 1 && digits[0] == '+') digits.remove_prefix(1);
      const auto quoted = [&] {
        return field.size() <= 64 ? std::string(field)
                                  : fmt::format("{}...({} bytes)", field.substr(0, 64), field.size());
      };
      if (integral) {
        std::int64_t iv = 0;
        const auto [iptr, iec] = std::from_chars(digits.data(), digits.data() + digits.size(), iv);
        if (iec != std::errc() || iptr != digits.data() + digits.size()) {  // not a plain integer: "7.0", "1e3"?
          double dv = 0.0;
          const auto [dptr, dec] = std::from_chars(digits.data(), digits.data() + digits.size(), dv);
          XGRAD_CHECK(dec == std::errc() && dptr == digits.data() + digits.size() && std::isfinite(dv) &&
                          dv == std::trunc(dv) && std::abs(dv) <= 9007199254740992.0,  // 2^53: exact in a double
                      "read_csv: {}:{}:{}: field {} '{}' is not an integer (option 'dtype' is {})", path, line_no,
                      column, fields + 1, quoted(), dtype_name(options.dtype));
          iv = static_cast<std::int64_t>(dv);
        }
        XGRAD_CHECK(iv >= lo && iv <= hi, "read_csv: {}:{}:{}: field {} '{}' is outside the range of {} [{}, {}]", path,
                    line_no, column, fields + 1, quoted(), dtype_name(options.dtype), lo, hi);
        ints.push_back(iv);
      } else {
        double v = 0.0;
        const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        XGRAD_CHECK(ec != std::errc::invalid_argument && ptr == digits.data() + digits.size(),
                    "read_csv: {}:{}:{}: field {} '{}' is not a number", path, line_no, column, fields + 1, quoted());
        // Out-of-range values: from_chars leaves v unchanged; keep the IEEE meaning (overflow -> inf).
        if (ec == std::errc::result_out_of_range) v = std::strtod(std::string(digits).c_str(), nullptr);
        values.push_back(v);
      }
      ++fields;
      if (stop == line.size()) break;
      start = stop + 1;
    }
    if (rows == 0) {
      columns = fields;
      first_row_line = line_no;
    } else {
      XGRAD_CHECK(fields == columns, "read_csv: {}:{}:1: row has {} fields but the first data row (line {}) has {}",
                  path, line_no, fields, first_row_line, columns);
    }
    ++rows;
  }
  XGRAD_CHECK(
      rows > 0, "read_csv: {}: no data rows ({})", path,
      text.empty() ? "the file is empty" : (options.header ? "only blank lines or a header" : "only blank lines"));
  const Shape shape{static_cast<std::int64_t>(rows), static_cast<std::int64_t>(columns)};
  if (!integral) return Tensor::from_vector(values, shape, options.dtype);
  Tensor out = Tensor::empty(shape, options.dtype);
  dispatch_all(options.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (std::size_t i = 0; i < ints.size(); ++i) p[i] = static_cast<T>(ints[i]);
  });
  return out;
}

std::shared_ptr<TensorDataset> npy_dataset(const std::string& data_path, const std::string& target_path) {
  Tensor data = load_npy(data_path);
  Tensor target = target_path.empty() ? Tensor() : load_npy(target_path);
  try {
    return std::make_shared<TensorDataset>(std::move(data), std::move(target));
  } catch (const Error& e) {
    detail::throw_error(fmt::format("npy_dataset('{}', '{}'): {}", data_path, target_path, e.what()));
  }
}

// ---- samplers ----------------------------------------------------------------------------------

std::vector<std::size_t> random_permutation(std::size_t n, std::uint64_t seed) {
  std::vector<std::size_t> p(n);
  std::iota(p.begin(), p.end(), std::size_t{0});
  Generator gen(seed);
  shuffle(p, gen);
  return p;
}

std::vector<std::size_t> SequentialSampler::indices() const {
  std::vector<std::size_t> p(size_);
  std::iota(p.begin(), p.end(), std::size_t{0});
  return p;
}

std::vector<std::size_t> RandomSampler::indices() const { return random_permutation(size_, seed_ + epoch()); }

DistributedSampler::DistributedSampler(std::size_t dataset_size, std::size_t num_replicas, std::size_t rank,
                                       bool shuffle, std::uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  XGRAD_CHECK(num_replicas > 0, "DistributedSampler: argument 'num_replicas' must be positive, got 0");
  XGRAD_CHECK(rank < num_replicas, "DistributedSampler: argument 'rank' ({}) must be less than num_replicas ({})", rank,
              num_replicas);
  XGRAD_CHECK(dataset_size > 0, "DistributedSampler: argument 'dataset_size' must be positive, got 0");
  // torch: with drop_last, ceil((n - R) / R) = floor(n / R) per replica; otherwise ceil(n / R).
  num_samples_ = drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
}

std::vector<std::size_t> DistributedSampler::indices() const {
  std::vector<std::size_t> order;
  if (shuffle_) {
    order = random_permutation(dataset_size_, seed_ + epoch());
  } else {
    order.resize(dataset_size_);
    std::iota(order.begin(), order.end(), std::size_t{0});
  }
  const std::size_t total = num_samples_ * num_replicas_;
  // Pad by repeating the order from its start (cyclically when the padding exceeds n), or cut the tail.
  for (std::size_t k = dataset_size_; k < total; ++k) order.push_back(order[k - dataset_size_]);
  order.resize(total);
  std::vector<std::size_t> mine;
  mine.reserve(num_samples_);
  for (std::size_t k = rank_; k < total; k += num_replicas_) mine.push_back(order[k]);
  return mine;
}

// ---- DataLoader --------------------------------------------------------------------------------

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options, std::shared_ptr<Sampler> sampler)
    : dataset_(std::move(dataset)), options_(options), sampler_(std::move(sampler)) {
  XGRAD_CHECK(dataset_ != nullptr, "DataLoader: argument 'dataset' is null");
  XGRAD_CHECK(options_.batch_size_ > 0, "DataLoader: option 'batch_size' must be positive, got 0");
  XGRAD_CHECK(dataset_->size() > 0, "DataLoader: the dataset is empty");
  XGRAD_CHECK(!(sampler_ && options_.shuffle_),
              "DataLoader: option 'shuffle' must be false when a sampler is given (the sampler decides the order)");
  if (!sampler_) {
    if (options_.shuffle_)
      sampler_ = std::make_shared<RandomSampler>(dataset_->size(), options_.seed_);
    else
      sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
  }
}

std::size_t DataLoader::size() const {
  const std::size_t n = sampler_->size(), b = options_.batch_size_;
  return options_.drop_last_ ? n / b : (n + b - 1) / b;
}

DataLoader::iterator DataLoader::begin() {
  order_ = sampler_->indices();
  sampler_->set_epoch(sampler_->epoch() + 1);
  return iterator(this, 0);
}

DataLoader::iterator DataLoader::end() { return iterator(this, size()); }

Example DataLoader::make_batch(std::size_t batch) const {
  XGRAD_CHECK(batch < size() && !order_.empty(), "DataLoader: batch {} requested outside the current pass ({} batches)",
              batch, size());
  const std::size_t first = batch * options_.batch_size_;
  const std::size_t count = std::min(options_.batch_size_, order_.size() - first);
  const std::span<const std::size_t> idx(order_.data() + first, count);
  for (std::size_t i : idx)
    XGRAD_CHECK(i < dataset_->size(), "DataLoader: the sampler yielded index {} but the dataset has size {}", i,
                dataset_->size());
  return dataset_->get_batch(idx);
}

Example& DataLoader::iterator::operator*() {
  XGRAD_CHECK(loader_ != nullptr, "DataLoader::iterator: dereferencing a default-constructed iterator");
  if (!built_) {
    current_ = loader_->make_batch(batch_);
    built_ = true;
  }
  return current_;
}

DataLoader::iterator& DataLoader::iterator::operator++() {
  ++batch_;
  built_ = false;
  current_ = Example{};
  return *this;
}

}  // namespace xgrad::nn
