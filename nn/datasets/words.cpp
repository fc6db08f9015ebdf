#include "xgrad/nn/datasets/words.hpp"

#include <fmt/core.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "xgrad/core/checked.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/core/file_io.hpp"
#include "xgrad/core/random.hpp"

namespace xgrad::nn::datasets {

namespace {
bool keep(const std::string& w, bool letters_only) {
  if (w.empty()) return false;
  for (unsigned char c : w) {
    if (letters_only ? (c < 'a' || c > 'z') : (c <= ' ' || c > '~' || c == '.')) return false;
  }
  return true;
}
}  // namespace

WordList::WordList(const WordListOptions& options) : id_of_(256, -1) {
  XGRAD_CHECK(options.val_fraction >= 0 && options.val_fraction < 1,
              "WordList: option 'val_fraction' must be in [0, 1), got {}", options.val_fraction);
  struct stat st {};
  if (::stat(options.path.c_str(), &st) != 0 && options.path == kDefaultPath)
    throw Error(
        fmt::format("WordList: '{}' not found; the Debian package {} provides it, install it with: "
                    "apt-get install {}",
                    options.path, kPackage, kPackage));
  const std::string text = read_regular_file(options.path, "WordList");
  std::vector<std::string> words;
  std::unordered_set<std::string> seen;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string w = text.substr(start, end - start);
    if (!w.empty() && w.back() == '\r') w.pop_back();
    if (keep(w, options.lowercase_letters_only) && seen.insert(w).second) words.push_back(std::move(w));
    start = end + 1;
  }
  XGRAD_CHECK(!words.empty(), "WordList: '{}' has no word left after filtering (lowercase_letters_only={})",
              options.path, options.lowercase_letters_only);
  std::vector<bool> present(256, false);
  for (const auto& w : words)
    for (unsigned char c : w) present[c] = true;
  for (int c = 0; c < 256; ++c)
    if (present[static_cast<std::size_t>(c)]) {
      chars_.push_back(static_cast<char>(c));
      id_of_[static_cast<std::size_t>(c)] = static_cast<int>(chars_.size());
    }
  // Fisher-Yates with Generator(seed), as RandomSampler (Note [Epochs and reproducibility]).
  Generator gen(options.seed);
  shuffle(words, gen);
  const auto n_val = static_cast<std::size_t>(std::floor(options.val_fraction * static_cast<double>(words.size())));
  train_.assign(words.begin(), words.end() - static_cast<std::ptrdiff_t>(n_val));
  val_.assign(words.end() - static_cast<std::ptrdiff_t>(n_val), words.end());
}

std::vector<std::int64_t> WordList::encode(const std::string& word) const {
  std::vector<std::int64_t> ids;
  ids.reserve(word.size());
  for (unsigned char c : word) {
    const int id = id_of_[c];
    XGRAD_CHECK(id > 0, "WordList::encode: character '{}' (byte {}) of \"{}\" is not in the vocabulary",
                static_cast<char>(c), static_cast<int>(c), word);
    ids.push_back(id);
  }
  return ids;
}

std::string WordList::decode(const std::vector<std::int64_t>& ids) const {
  std::string out;
  for (auto id : ids) {
    XGRAD_CHECK(id >= 0 && id < vocab_size(), "WordList::decode: id {} is outside [0, {})", id, vocab_size());
    out.push_back(id == 0 ? '.' : chars_[static_cast<std::size_t>(id - 1)]);
  }
  return out;
}

std::shared_ptr<TensorDataset> WordList::context_dataset(Split split, std::int64_t block_size) const {
  XGRAD_CHECK(block_size >= 1, "WordList::context_dataset: argument 'block_size' must be >= 1, got {}", block_size);
  const auto& ws = words(split);
  std::int64_t rows = 0;
  for (const auto& w : ws) rows += static_cast<std::int64_t>(w.size()) + 1;
  constexpr const char* kFn = "WordList::context_dataset";
  check_host_memory(
      checked_nbytes(checked_numel({rows, block_size}, kFn, "block_size"), sizeof(std::int64_t), kFn, "block_size"),
      kFn, "block_size");
  Tensor data = Tensor::zeros({rows, block_size}, kInt64);
  Tensor target = Tensor::zeros({rows}, kInt64);
  auto* dp = data.data<std::int64_t>();
  auto* tp = target.data<std::int64_t>();
  std::int64_t r = 0;
  std::vector<std::int64_t> context(static_cast<std::size_t>(block_size));
  for (const auto& w : ws) {
    std::fill(context.begin(), context.end(), 0);
    std::vector<std::int64_t> ids = encode(w);
    ids.push_back(0);
    for (std::int64_t next : ids) {
      for (std::int64_t k = 0; k < block_size; ++k) dp[r * block_size + k] = context[static_cast<std::size_t>(k)];
      tp[r] = next;
      ++r;
      std::rotate(context.begin(), context.begin() + 1, context.end());
      context.back() = next;
    }
  }
  return std::make_shared<TensorDataset>(data, target);
}

}  // namespace xgrad::nn::datasets
