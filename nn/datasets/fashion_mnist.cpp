#include "xgrad/nn/datasets/fashion_mnist.hpp"

#include <fmt/core.h>
#include <sys/stat.h>

#include <string>

#include "xgrad/core/error.hpp"
#include "xgrad/nn/datasets/idx.hpp"

namespace xgrad::nn::datasets {

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

/// root/name.gz, else root/name; an error naming both (and the package) when neither exists.
std::string find_file(const std::string& root, const std::string& name) {
  const std::string base = root + "/" + name;
  if (exists(base + ".gz")) return base + ".gz";
  if (exists(base)) return base;
  const bool packaged = root == FashionMNIST::kDefaultRoot;
  throw Error(fmt::format("FashionMNIST: '{}.gz' (or '{}') not found{}", base, base,
                          packaged ? fmt::format("; the Debian package {} provides it, install it with: "
                                                 "apt-get install {}",
                                                 FashionMNIST::kPackage, FashionMNIST::kPackage)
                                   : std::string()));
}

TensorDataset load(FashionMNIST::Split split, const std::string& root) {
  const std::string prefix = split == FashionMNIST::Split::train ? "train" : "t10k";
  const std::string image_path = find_file(root, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_file(root, prefix + "-labels-idx1-ubyte");
  const std::string image_bytes = read_idx_bytes(image_path, "FashionMNIST");
  const std::string label_bytes = read_idx_bytes(label_path, "FashionMNIST");
  // The value type is byte 2 of the magic: uint8 (0x08) for both files.
  XGRAD_CHECK(image_bytes.size() >= 4 && image_bytes[2] == 0x08 && label_bytes.size() >= 4 && label_bytes[2] == 0x08,
              "FashionMNIST: '{}' and '{}' must be IDX files of uint8 values", image_path, label_path);
  Tensor images = parse_idx(image_bytes, image_path, kFloat32);
  Tensor labels = parse_idx(label_bytes, label_path, kFloat32);
  XGRAD_CHECK(images.dim() == 3 && images.size(1) == 28 && images.size(2) == 28,
              "FashionMNIST: '{}' holds images of shape {}, not (N, 28, 28)", image_path, shape_str(images.shape()));
  XGRAD_CHECK(labels.dim() == 1 && labels.size(0) == images.size(0),
              "FashionMNIST: '{}' holds labels of shape {} but '{}' holds {} images", label_path,
              shape_str(labels.shape()), image_path, images.size(0));
  const float* lp = labels.data<float>();
  for (std::int64_t i = 0; i < labels.numel(); ++i)
    XGRAD_CHECK(lp[i] <= 9.0f, "FashionMNIST: '{}': label {} of sample {} is not a class 0..9", label_path, lp[i], i);
  float* ip = images.data<float>();
  for (std::int64_t i = 0; i < images.numel(); ++i) ip[i] /= 255.0f;
  return TensorDataset(alias_with_shape(images, {images.size(0), 1, 28, 28}), labels.to(kInt64));
}

}  // namespace

FashionMNIST::FashionMNIST(Split split, const std::string& root) : split_(split), rows_(load(split, root)) {}

}  // namespace xgrad::nn::datasets
