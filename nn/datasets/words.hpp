#pragma once
// nn::datasets::WordList: a list of words (one per line; by default the Debian package wamerican's
// /usr/share/dict/american-english), its character vocabulary and a deterministic train/validation
// split, for character-level language models in the style of makemore.
//
//   nn::datasets::WordList words;                                    // defaults below
//   auto train = words.context_dataset(nn::datasets::WordList::Split::train, 3);
//   nn::DataLoader loader(train, nn::DataLoaderOptions().batch_size(32).shuffle(true));
//   // batch.data (32, 3): the ids of the 3 previous characters; batch.target (32): the next id
//
// Token 0 is the word boundary ('.'); the characters of the vocabulary get 1, 2, ... in byte order.
// Ids are int64 tensors.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xgrad/nn/data.hpp"

namespace xgrad::nn::datasets {

struct WordListOptions {
  /// Where the Debian package wamerican (WordList::kPackage) installs its list.
  std::string path = "/usr/share/dict/american-english";
  /// Keep only the words made of the letters a-z (drops names, possessives and accented words); when
  /// false, every word of printable ASCII characters other than '.' and space is kept.
  bool lowercase_letters_only = true;
  /// The share of words in the validation split, in [0, 1).
  double val_fraction = 0.1;
  /// Seed of the split's shuffle (Fisher-Yates with xgrad's Generator, as RandomSampler): the same
  /// seed gives the same split on every machine.
  std::uint64_t seed = 0;
};

class WordList {
 public:
  enum class Split { train, val };
  /// The default path (WordListOptions::path) and the Debian package that installs it. Every loader
  /// of nn/datasets names its package this way: a test (tests/nn/test_datasets.cpp) checks that the
  /// main job's install step (scripts/install-deps.sh --main) installs the package of each loader
  /// that an example of scripts/main.sh uses.
  static constexpr const char* kDefaultPath = "/usr/share/dict/american-english";
  static constexpr const char* kPackage = "wamerican";
  /// Reads and filters the words (duplicates removed, first occurrence kept), builds the vocabulary
  /// and splits. Errors (xgrad::Error): the file missing (naming the file, and the package wamerican
  /// with "install it with: apt-get install wamerican" for the default path) or unreadable, no word
  /// left after filtering, val_fraction outside [0, 1).
  explicit WordList(const WordListOptions& options = {});

  /// The words of one split, in the split's (shuffled) order.
  const std::vector<std::string>& words(Split split) const { return split == Split::train ? train_ : val_; }
  /// The vocabulary's characters in id order (id = index + 1; 0 is the boundary).
  const std::string& characters() const { return chars_; }
  /// Number of token ids: characters().size() + 1.
  std::int64_t vocab_size() const { return static_cast<std::int64_t>(chars_.size()) + 1; }
  /// Ids of a word's characters. Errors: a character outside the vocabulary.
  std::vector<std::int64_t> encode(const std::string& word) const;
  /// The characters of ids (0 becomes '.'). Errors: an id outside [0, vocab_size).
  std::string decode(const std::vector<std::int64_t>& ids) const;

  /// One example per character of every word of the split and per word end: data (block_size, int64) the
  /// previous block_size ids (0-padded at the word's start), target (0-d int64) the next id (0 after the
  /// last character). Errors: block_size < 1.
  std::shared_ptr<TensorDataset> context_dataset(Split split, std::int64_t block_size) const;

 private:
  std::string chars_;
  std::vector<int> id_of_;  // by byte value; -1 outside the vocabulary
  std::vector<std::string> train_, val_;
};

}  // namespace xgrad::nn::datasets
