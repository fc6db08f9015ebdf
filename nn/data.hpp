#pragma once
// Data loading, following torch::data (simplified): a Dataset maps an index to an Example, a
// Sampler yields the order of indices for one epoch, and a DataLoader walks that order in batches,
// stacking the examples of each batch along a new leading axis.
//
//   auto ds = std::make_shared<nn::TensorDataset>(x, y);          // x (N, ...), y (N, ...)
//   nn::DataLoader loader(ds, nn::DataLoaderOptions().batch_size(32).shuffle(true).seed(7));
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (auto& batch : loader) { /* batch.data (B, ...), batch.target (B, ...) */ }
//
// Note [Epochs and reproducibility]: the order of an epoch is a pure function of (seed, epoch):
// shuffling uses xgrad's Generator (mt19937_64, fixed by the standard) seeded with seed + epoch and
// a Fisher-Yates shuffle, so the same seed gives the same batches on every machine and compiler.
// The sampler holds the epoch. Each pass over a DataLoader (each begin()) draws the sampler's
// current epoch and then advances it by one, so consecutive passes see new permutations without
// any call; `set_epoch(e)` on the loader or on the sampler (as with torch's DistributedSampler)
// chooses the epoch of the next pass.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "xgrad/core/tensor.hpp"

namespace xgrad::nn {

/// One sample, or a batch of samples stacked along axis 0. `target` may be undefined.
struct Example {
  Tensor data;
  Tensor target;
};

/// A random-access collection of examples (torch::data::Dataset).
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Number of examples.
  virtual std::size_t size() const = 0;
  /// Example `i` (0 <= i < size()). Implementations throw xgrad::Error for an index out of range.
  virtual Example get(std::size_t i) const = 0;
  /// The examples at `indices` stacked along a new axis 0: data (B, ...), target (B, ...) or undefined.
  /// The default calls get() for each index and copies the results into one tensor; every example
  /// must have the same data (and target) shape and dtype, else xgrad::Error names the index and both
  /// shapes. Datasets that can gather rows directly (TensorDataset) override it. The result has no
  /// autograd history.
  virtual Example get_batch(std::span<const std::size_t> indices) const;
};

/// Examples are the rows of `data` (and `target`): example i is data[i] (shape data.shape[1:]) and
/// target[i]. Like torch::data::datasets::TensorDataset, with an optional target.
/// Errors: data undefined or 0-d; target (when given) 0-d or with a first dimension different from
/// data's (the message names both shapes).
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(Tensor data, Tensor target = Tensor());
  std::size_t size() const override { return size_; }
  /// Copies of row i (no autograd history).
  Example get(std::size_t i) const override;
  /// Fast path: one memcpy per row of data and of target into the batch tensors.
  Example get_batch(std::span<const std::size_t> indices) const override;
  const Tensor& data() const { return data_; }
  const Tensor& target() const { return target_; }

 private:
  Tensor data_, target_;
  std::size_t size_;
};

// ---- readers ---------------------------------------------------------------------------------

struct CsvOptions {
  char delimiter = ',';
  /// The first non-blank line holds column names and is skipped.
  bool header = true;
  Dtype dtype = kFloat32;
};

/// Reads a CSV file of numbers into a 2-d tensor (rows, columns). Fields are parsed as decimal
/// floating-point numbers (std::from_chars: "1", "-2.5e3", "nan", "inf"); spaces and tabs around a
/// field are ignored, blank lines are skipped, and "\r\n" line ends are accepted. Quoting is not
/// supported. Errors (xgrad::Error, naming the file and 1-based line:column): the file cannot be
/// opened (with the OS reason, e.g. "No such file or directory") or is not a regular file (a FIFO,
/// directory or device is refused without blocking; read_regular_file, core/file_io.hpp); no data rows (empty file, or
/// a header only); a field that is empty or not a number (the field is quoted in the message); a row whose field count
/// differs from the first data row's. With an integer or bool dtype every field must be an integer
/// ("7", also "7.0" or "1e3") within the dtype's range, read exactly: "1.5", "nan" or 300 for uint8
/// are errors naming the field, never truncated or wrapped.
Tensor read_csv(const std::string& path, const CsvOptions& options = {});

/// TensorDataset from two .npy files (see core/npy.hpp for the supported dtypes): examples are the
/// rows of `data_path`, targets the rows of `target_path` (empty: no target). Errors from load_npy
/// name the file (and the OS reason when it cannot be opened; non-regular files are refused); mismatched first
/// dimensions throw as in TensorDataset, naming both files.
std::shared_ptr<TensorDataset> npy_dataset(const std::string& data_path, const std::string& target_path = "");

// ---- samplers --------------------------------------------------------------------------------

/// Yields the dataset indices of one epoch, in order. The epoch is held by the sampler (see
/// Note [Epochs and reproducibility]); indices() is a pure function of the sampler's settings and
/// its epoch.
class Sampler {
 public:
  virtual ~Sampler() = default;
  /// Number of indices one epoch yields.
  virtual std::size_t size() const = 0;
  /// The indices of the current epoch.
  virtual std::vector<std::size_t> indices() const = 0;
  void set_epoch(std::uint64_t epoch) { epoch_ = epoch; }
  std::uint64_t epoch() const { return epoch_; }

 private:
  std::uint64_t epoch_ = 0;
};

/// 0, 1, ..., size-1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(std::size_t size) : size_(size) {}
  std::size_t size() const override { return size_; }
  std::vector<std::size_t> indices() const override;

 private:
  std::size_t size_;
};

/// A permutation of 0..size-1, a new one each epoch: Fisher-Yates with Generator(seed + epoch).
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(std::size_t size, std::uint64_t seed = 0) : size_(size), seed_(seed) {}
  std::size_t size() const override { return size_; }
  std::vector<std::size_t> indices() const override;

 private:
  std::size_t size_;
  std::uint64_t seed_;
};

/// The share of one replica (rank) of a data-parallel job, with the semantics of
/// torch.utils.data.DistributedSampler: every rank builds the same epoch order (a permutation from
/// Generator(seed + epoch) when `shuffle`, else 0..n-1), then
///  - unless drop_last, pads it by repeating its beginning up to a multiple of num_replicas, so every
///    index appears at least once per epoch and every rank gets ceil(n / num_replicas) indices;
///  - with drop_last, drops the tail instead: every rank gets floor(n / num_replicas) indices;
/// and rank r takes positions r, r + num_replicas, r + 2 num_replicas, ... Call set_epoch(e) (here or
/// on the DataLoader) with the same e on every rank. Needs no MPI: pass world_size() and rank().
/// Errors: num_replicas 0; rank >= num_replicas; dataset_size 0.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(std::size_t dataset_size, std::size_t num_replicas, std::size_t rank, bool shuffle = true,
                     std::uint64_t seed = 0, bool drop_last = false);
  std::size_t size() const override { return num_samples_; }
  std::vector<std::size_t> indices() const override;
  std::size_t num_replicas() const { return num_replicas_; }
  std::size_t rank() const { return rank_; }

 private:
  std::size_t dataset_size_, num_replicas_, rank_;
  bool shuffle_;
  std::uint64_t seed_;
  bool drop_last_;
  std::size_t num_samples_;
};

/// Fisher-Yates permutation of 0..n-1 from Generator(seed) (the shuffle every sampler uses).
std::vector<std::size_t> random_permutation(std::size_t n, std::uint64_t seed);

// ---- loader ----------------------------------------------------------------------------------

/// Builder-style options like torch::data::DataLoaderOptions.
struct DataLoaderOptions {
  DataLoaderOptions() = default;
  explicit DataLoaderOptions(std::size_t batch) : batch_size_(batch) {}
  DataLoaderOptions& batch_size(std::size_t v) {
    batch_size_ = v;
    return *this;
  }
  /// Ignored when an explicit sampler is given (it must then be false).
  DataLoaderOptions& shuffle(bool v) {
    shuffle_ = v;
    return *this;
  }
  /// Drop the last batch when it would be smaller than batch_size.
  DataLoaderOptions& drop_last(bool v) {
    drop_last_ = v;
    return *this;
  }
  DataLoaderOptions& seed(std::uint64_t v) {
    seed_ = v;
    return *this;
  }
  std::size_t batch_size_ = 1;
  bool shuffle_ = false;
  bool drop_last_ = false;
  std::uint64_t seed_ = 0;
};

/// Iterates over a dataset in batches: `for (auto& batch : loader)`, where batch is an Example with
/// data (B, ...) and target (B, ...) (undefined if the dataset has no target); B = batch_size except
/// possibly for the last batch (dropped with drop_last). The order comes from the sampler: the one
/// given, else RandomSampler(dataset size, seed) when shuffle, else SequentialSampler.
/// One pass at a time: begin() starts a new epoch (Note [Epochs and reproducibility]) and invalidates
/// iterators of an earlier pass. Batches are built on the calling thread when dereferenced.
/// Errors: null dataset; batch_size 0; shuffle together with an explicit sampler; an empty dataset; a
/// sampler index >= the dataset size (thrown when that batch is built, naming the index).
class DataLoader {
 public:
  DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options, std::shared_ptr<Sampler> sampler = nullptr);

  class iterator {
   public:
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    Example& operator*();
    Example* operator->() { return &**this; }
    iterator& operator++();
    bool operator==(const iterator& other) const { return batch_ == other.batch_; }

   private:
    friend class DataLoader;
    iterator(DataLoader* loader, std::size_t batch) : loader_(loader), batch_(batch) {}
    DataLoader* loader_ = nullptr;
    std::size_t batch_ = 0;
    bool built_ = false;
    Example current_;
  };

  /// Starts a pass: draws the sampler's indices for its current epoch, then advances its epoch.
  iterator begin();
  iterator end();
  /// Number of batches per epoch.
  std::size_t size() const;
  /// Epoch of the next pass (forwards to the sampler).
  void set_epoch(std::uint64_t epoch) { sampler_->set_epoch(epoch); }
  std::uint64_t epoch() const { return sampler_->epoch(); }
  const Dataset& dataset() const { return *dataset_; }
  Sampler& sampler() { return *sampler_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  Example make_batch(std::size_t batch) const;
  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<Sampler> sampler_;
  std::vector<std::size_t> order_;  // indices of the current pass
};

}  // namespace xgrad::nn
