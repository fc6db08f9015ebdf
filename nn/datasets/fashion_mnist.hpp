#pragma once
// nn::datasets::FashionMNIST: Zalando's Fashion-MNIST (70000 28x28 grey images of 10 kinds of
// clothing; 60000 train, 10000 test), read from the files of the Debian package
// dataset-fashion-mnist (/usr/share/datasets/fashion-mnist/*-idx?-ubyte.gz), like
// torchvision.datasets.FashionMNIST without the download.
//
//   auto train = std::make_shared<nn::datasets::FashionMNIST>(nn::datasets::FashionMNIST::Split::train);
//   nn::DataLoader loader(train, nn::DataLoaderOptions().batch_size(64).shuffle(true));
//   for (auto& batch : loader) { /* batch.data (64, 1, 28, 28) in [0, 1], batch.target (64) */ }
//
// Labels are int64 class indices 0..9, as torchvision's.
#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "xgrad/core/tensor.hpp"
#include "xgrad/nn/data.hpp"

namespace xgrad::nn::datasets {

class FashionMNIST : public Dataset {
 public:
  enum class Split { train, test };
  /// Where the Debian package kPackage installs its files (see WordList::kPackage for the check that
  /// the main job installs it).
  static constexpr const char* kDefaultRoot = "/usr/share/datasets/fashion-mnist";
  static constexpr const char* kPackage = "dataset-fashion-mnist";
  /// The class names, by label (torchvision's FashionMNIST.classes).
  static constexpr std::array<const char*, 10> kClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                           "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

  /// Reads the split's images and labels from `root` ("train-images-idx3-ubyte" and
  /// "train-labels-idx1-ubyte", or "t10k-..." for the test split; each NAME.gz or NAME).
  /// Errors (xgrad::Error): a file missing (the message names the file and says "install it with:
  /// apt-get install dataset-fashion-mnist" when root is the default), a corrupt file (read_idx's
  /// errors), images not (N, 28, 28) uint8, labels not (N) uint8 or outside 0..9, or the two counts
  /// differing.
  explicit FashionMNIST(Split split = Split::train, const std::string& root = kDefaultRoot);

  std::size_t size() const override { return rows_.size(); }
  /// Image i (1, 28, 28) float32 in [0, 1] and its label (a 0-d int64 tensor).
  Example get(std::size_t i) const override { return rows_.get(i); }
  Example get_batch(std::span<const std::size_t> indices) const override { return rows_.get_batch(indices); }

  /// All images (N, 1, 28, 28), pixel / 255.
  const Tensor& images() const { return rows_.data(); }
  /// All labels (N), int64 0..9.
  const Tensor& labels() const { return rows_.target(); }
  Split split() const { return split_; }

 private:
  Split split_;
  TensorDataset rows_;
};

}  // namespace xgrad::nn::datasets
