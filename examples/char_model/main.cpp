// char_model: a character-level language model of English words, in the style of makemore.
//
// It reads the word list of the Debian package wamerican (nn::datasets::WordList), and learns to
// predict each next character of a word from the ones before it, the word's end included: every
// word is the sequence ". c1 c2 ... cn" with targets "c1 c2 ... cn .". The model is an embedding,
// a recurrent stack (nn::GRU by default, nn::LSTM with --model lstm) or a small causal
// Transformer (--model transformer: positional embedding, nn::TransformerEncoder under a causal
// mask), and a linear head over the characters. It trains with Adam on random batches of training words; as it trains
// it prints the loss per character on held-out words (nats and bits) and new words sampled from the model, and at the
// end it saves a checkpoint (safetensors: nn::load reads it, and so does Python's safetensors package).
//
//   build/release/examples/char_model                  # the full run (GRU, 2 layers of 256)
//   build/release/examples/char_model --model lstm
//   build/release/examples/char_model --model transformer --layers 4 --embed 128
//   build/release/examples/char_model --quick          # the short run; exits 1 unless the model learned
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "xgrad/xgrad.hpp"

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

struct Settings {
  std::string model = "gru";
  std::int64_t embed = 64, hidden = 256, layers = 2, heads = 4;
  double dropout = 0.1;
  std::int64_t steps = 4000, batch = 64, eval_every = 500, val_words = 4000, samples = 10;
  double lr = 3e-3;
  std::uint64_t seed = 1;
  std::string out = "out/char_model";
  std::string words = nn::datasets::WordList::kDefaultPath;
  int threads = 0;
  bool quick = false;
};

/// Maps (B, T) int64 character ids to (B, T, V) next-character logits.
class CharModel : public nn::Module {
 public:
  using nn::Module::Module;
  virtual Tensor forward(const Tensor& ids) = 0;
};

/// Embedding -> GRU or LSTM stack (batch first) -> Linear over the vocabulary.
class RnnModel : public CharModel {
 public:
  RnnModel(const Settings& s, std::int64_t vocab) : CharModel(s.model == "lstm" ? "CharLSTM" : "CharGRU") {
    emb_ = register_module("emb", std::make_shared<nn::Embedding>(vocab, s.embed, kFloat32, s.seed));
    if (s.model == "lstm")
      lstm_ = register_module("rnn", std::make_shared<nn::LSTM>(s.embed, s.hidden, s.layers, true, true, s.dropout,
                                                                false, kFloat32, s.seed + 1));
    else
      gru_ = register_module("rnn", std::make_shared<nn::GRU>(s.embed, s.hidden, s.layers, true, true, s.dropout, false,
                                                              kFloat32, s.seed + 1));
    head_ = register_module("head", std::make_shared<nn::Linear>(s.hidden, vocab, true, kFloat32, s.seed + 2));
  }
  Tensor forward(const Tensor& ids) override {
    const Tensor e = emb_->forward(ids);
    const Tensor h = lstm_ ? lstm_->forward(e).output : gru_->forward(e).output;
    return head_->forward(h);
  }

 private:
  std::shared_ptr<nn::Embedding> emb_;
  std::shared_ptr<nn::GRU> gru_;
  std::shared_ptr<nn::LSTM> lstm_;
  std::shared_ptr<nn::Linear> head_;
};

/// A small causal Transformer: token embedding + learned positional embedding -> a stack of
/// TransformerEncoderLayer (pre-norm, GELU, batch first) under a causal mask (position t sees
/// positions <= t only) -> LayerNorm -> Linear over the vocabulary.
class TransformerModel : public CharModel {
 public:
  TransformerModel(const Settings& s, std::int64_t vocab, std::int64_t max_len)
      : CharModel("CharTransformer"), max_len_(max_len) {
    tok_ = register_module("tok", std::make_shared<nn::Embedding>(vocab, s.embed, kFloat32, s.seed));
    pos_ = register_module("pos", std::make_shared<nn::Embedding>(max_len, s.embed, kFloat32, s.seed + 1));
    const nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(s.embed, s.heads)
                                                .dim_feedforward(4 * s.embed)
                                                .dropout(s.dropout)
                                                .activation("gelu")
                                                .batch_first(true)
                                                .norm_first(true),
                                            s.seed + 2);
    encoder_ = register_module("encoder", std::make_shared<nn::TransformerEncoder>(
                                              layer, s.layers, std::make_shared<nn::LayerNorm>(Shape{s.embed})));
    head_ = register_module("head", std::make_shared<nn::Linear>(s.embed, vocab, true, kFloat32, s.seed + 3));
  }
  Tensor forward(const Tensor& ids) override {
    const std::int64_t T = ids.size(1);
    if (T > max_len_)
      throw std::invalid_argument("char_model: a sequence of " + std::to_string(T) + " tokens is longer than the " +
                                  std::to_string(max_len_) + " positions of the model");
    std::vector<std::int64_t> positions(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t) positions[static_cast<std::size_t>(t)] = t;
    // Additive causal mask (T, T): 0 on and below the diagonal, -inf above.
    std::vector<double> mask(static_cast<std::size_t>(T * T), 0.0);
    for (std::int64_t i = 0; i < T; ++i)
      for (std::int64_t j = i + 1; j < T; ++j) mask[static_cast<std::size_t>(i * T + j)] = -INFINITY;
    const Tensor x = add(tok_->forward(ids), pos_->forward(positions));
    return head_->forward(encoder_->forward(x, Tensor::from_vector(mask, {T, T}, kFloat32)));
  }

 private:
  std::int64_t max_len_;
  std::shared_ptr<nn::Embedding> tok_, pos_;
  std::shared_ptr<nn::TransformerEncoder> encoder_;
  std::shared_ptr<nn::Linear> head_;
};

/// A batch of words as inputs ". c1 .. cn" and targets "c1 .. cn ." (B, T) with T the longest
/// word + 1; shorter words are padded with 0 in the input and ignore_index (-100) in the target.
struct Batch {
  Tensor input, target;
  std::int64_t characters = 0;  // targets that count (characters and word ends)
};

Batch make_batch(const nn::datasets::WordList& words, const std::vector<const std::string*>& batch) {
  std::size_t longest = 0;
  for (const auto* w : batch) longest = std::max(longest, w->size());
  const auto B = static_cast<std::int64_t>(batch.size()), T = static_cast<std::int64_t>(longest) + 1;
  std::vector<double> in(static_cast<std::size_t>(B * T), 0.0), tg(static_cast<std::size_t>(B * T), -100.0);
  Batch out;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::vector<std::int64_t> ids = words.encode(*batch[static_cast<std::size_t>(b)]);
    const auto n = static_cast<std::int64_t>(ids.size());
    for (std::int64_t t = 0; t <= n; ++t) {
      if (t > 0) in[static_cast<std::size_t>(b * T + t)] = static_cast<double>(ids[static_cast<std::size_t>(t - 1)]);
      tg[static_cast<std::size_t>(b * T + t)] = t < n ? static_cast<double>(ids[static_cast<std::size_t>(t)]) : 0.0;
    }
    out.characters += n + 1;
  }
  out.input = Tensor::from_vector(in, {B, T}, kInt64);
  out.target = Tensor::from_vector(tg, {B * T}, kInt64);
  return out;
}

/// Mean loss per character (nats) of the model on `words` (in batches, no dropout, no graph).
double evaluate(CharModel& model, const nn::datasets::WordList& list, const std::vector<std::string>& words,
                std::int64_t batch) {
  NoGradGuard no_grad;
  model.eval();
  double total = 0;
  std::int64_t count = 0;
  for (std::size_t i = 0; i < words.size(); i += static_cast<std::size_t>(batch)) {
    std::vector<const std::string*> ws;
    for (std::size_t j = i; j < std::min(words.size(), i + static_cast<std::size_t>(batch)); ++j)
      ws.push_back(&words[j]);
    const Batch b = make_batch(list, ws);
    const Tensor logits = model.forward(b.input);
    const Tensor loss = cross_entropy(reshape(logits, {b.target.size(0), logits.size(-1)}), b.target, Reduction::Sum);
    total += loss.item();
    count += b.characters;
  }
  model.train();
  return count > 0 ? total / static_cast<double>(count) : 0.0;
}

/// A new word: characters drawn one by one from the model's distribution until the end token.
std::string sample_word(CharModel& model, const nn::datasets::WordList& list, Generator& gen, std::int64_t max_len) {
  NoGradGuard no_grad;
  model.eval();
  std::vector<std::int64_t> ids = {0};
  std::string word;
  while (static_cast<std::int64_t>(word.size()) < max_len) {
    std::vector<double> row(ids.begin(), ids.end());
    const Tensor logits = model.forward(Tensor::from_vector(row, {1, static_cast<std::int64_t>(ids.size())}, kInt64));
    const Tensor last = softmax(slice(reshape(logits, {static_cast<std::int64_t>(ids.size()), logits.size(-1)}), 0,
                                      static_cast<std::int64_t>(ids.size()) - 1, static_cast<std::int64_t>(ids.size())),
                                -1);
    const std::vector<double> p = last.to_vector();
    double u = gen.uniform(), acc = 0;
    std::int64_t next = static_cast<std::int64_t>(p.size()) - 1;
    for (std::size_t k = 0; k < p.size(); ++k) {
      acc += p[k];
      if (u < acc) {
        next = static_cast<std::int64_t>(k);
        break;
      }
    }
    if (next == 0) break;
    word += list.decode({next});
    ids.push_back(next);
  }
  model.train();
  return word;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{
      "char_model: a character-level model of English words (wamerican), GRU, LSTM or Transformer, trained with Adam"};
  app.add_option("--model", s.model, "gru, lstm or transformer")
      ->check(CLI::IsMember({"gru", "lstm", "transformer"}))
      ->capture_default_str();
  app.add_option("--embed", s.embed, "embedding size")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--hidden", s.hidden, "hidden size of each recurrent layer")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--layers", s.layers, "recurrent or Transformer layers")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--heads", s.heads, "attention heads (transformer; must divide --embed)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--dropout", s.dropout, "dropout between recurrent layers / in the Transformer layers")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--steps", s.steps, "training steps (batches)")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--batch", s.batch, "words per batch")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr", s.lr, "Adam learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--eval-every", s.eval_every, "steps between validation losses and samples")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--val-words", s.val_words, "validation words evaluated (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--samples", s.samples, "words sampled at each evaluation")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seed", s.seed, "seed")->capture_default_str();
  app.add_option("--words", s.words, "word list, one word per line")->capture_default_str();
  app.add_option("--out", s.out, "output folder for the checkpoint")->capture_default_str();
  app.add_option("--threads", s.threads, "TBB threads (0: all cores)")->capture_default_str();
  app.add_flag("--quick", s.quick,
               "a short run for tests (one small layer, 300 steps): exits 1 unless the validation loss per character "
               "falls below 2.5 nats");
  CLI11_PARSE(app, argc, argv);
  if (s.threads > 0) set_num_threads(s.threads);
  if (s.quick) {
    s.embed = 24, s.hidden = 64, s.layers = 1, s.steps = 300, s.eval_every = 100, s.val_words = 1000, s.samples = 6;
    s.lr = 1e-2;
    if (s.model == "transformer") s.embed = 32, s.heads = 4, s.lr = 3e-3, s.dropout = 0.0;
  }

  try {
    nn::datasets::WordListOptions wo;
    wo.path = s.words;
    const nn::datasets::WordList list(wo);
    const auto& train = list.words(nn::datasets::WordList::Split::train);
    std::vector<std::string> val = list.words(nn::datasets::WordList::Split::val);
    if (s.val_words > 0 && static_cast<std::int64_t>(val.size()) > s.val_words)
      val.resize(static_cast<std::size_t>(s.val_words));
    const std::set<std::string> known(train.begin(), train.end());
    std::printf("words: %zu train, %zu validation (of %zu held out); vocabulary %lld characters + end\n", train.size(),
                val.size(), list.words(nn::datasets::WordList::Split::val).size(),
                static_cast<long long>(list.vocab_size() - 1));

    std::size_t longest = 0;
    for (const auto split : {nn::datasets::WordList::Split::train, nn::datasets::WordList::Split::val})
      for (const auto& w : list.words(split)) longest = std::max(longest, w.size());
    const std::int64_t max_len = std::max<std::int64_t>(32, static_cast<std::int64_t>(longest) + 1);
    std::unique_ptr<CharModel> owned;
    if (s.model == "transformer")
      owned = std::make_unique<TransformerModel>(s, list.vocab_size(), max_len);
    else
      owned = std::make_unique<RnnModel>(s, list.vocab_size());
    CharModel& model = *owned;
    std::printf("model: %lld parameters\n", static_cast<long long>(model.num_parameters()));
    nn::Adam opt(model.parameters(), nn::AdamOptions(s.lr));
    Generator gen(s.seed), sampler(s.seed + 7);
    const double uniform_nats = std::log(static_cast<double>(list.vocab_size()));
    double val_nats = evaluate(model, list, val, 256);
    std::printf("step %5d  val %.3f nats/char (%.3f bits); uniform guess %.3f nats\n", 0, val_nats,
                val_nats / std::log(2.0), uniform_nats);
    const auto start = std::chrono::steady_clock::now();
    double running = 0;
    std::int64_t running_n = 0;
    for (std::int64_t step = 1; step <= s.steps; ++step) {
      std::vector<const std::string*> ws;
      for (std::int64_t b = 0; b < s.batch; ++b) ws.push_back(&train[gen.integer(train.size())]);
      const Batch b = make_batch(list, ws);
      const Tensor logits = model.forward(b.input);
      const Tensor loss = cross_entropy(reshape(logits, {b.target.size(0), logits.size(-1)}), b.target);
      opt.zero_grad();
      loss.backward();
      nn::clip_grad_norm_(model.parameters(), 1.0);
      opt.step();
      running += loss.item();
      ++running_n;
      if (step % s.eval_every == 0 || step == s.steps) {
        val_nats = evaluate(model, list, val, 256);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("step %5lld  train %.3f  val %.3f nats/char (%.3f bits)  %.1f s\n", static_cast<long long>(step),
                    running / static_cast<double>(running_n), val_nats, val_nats / std::log(2.0), secs);
        running = 0, running_n = 0;
        std::string line;
        int fresh = 0;
        for (std::int64_t k = 0; k < s.samples; ++k) {
          const std::string w = sample_word(model, list, sampler, max_len - 1);
          const bool is_new = !known.count(w);
          fresh += is_new;
          line += " " + (w.empty() ? std::string("(empty)") : w) + (is_new ? "*" : "");
        }
        std::printf("  samples (* = not a training word, %d of %lld):%s\n", fresh, static_cast<long long>(s.samples),
                    line.c_str());
      }
    }
    fs::create_directories(s.out);
    const std::string ckpt = (fs::path(s.out) / ("char_model_" + s.model + ".safetensors")).string();
    nn::save(model, ckpt,
             {{"model", s.model}, {"vocabulary", list.characters()}, {"val_nats_per_char", std::to_string(val_nats)}});
    std::printf("checkpoint: %s\n", ckpt.c_str());
    if (s.quick && !(val_nats < 2.5)) {
      std::printf("FAILED: validation loss %.3f nats/char is not below 2.5 (uniform %.3f)\n", val_nats, uniform_nats);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
