#pragma once
// Seeded random numbers, the same on every machine and at any thread count.
//
// Note [Counter-based random numbers]: a Generator is a key (its seed) and a position in that key's
// Philox4x32-10 stream (core/detail/philox.hpp), counted in blocks of four 32-bit words. A draw
// reserves the blocks it uses by advancing the position atomically, then computes them from (key,
// block number) alone. So drawing is thread-safe, and a bulk draw (Tensor::rand and randn, uniform_,
// normal_, dropout masks) fills its elements in parallel with the same bits at any thread count,
// because each element's bits are fixed by its index. A bulk draw takes groups of 16 consecutive
// blocks; block 16g + l is lane l of group g, and a group's words go to consecutive elements lane by
// lane (so that the loops vectorise):
// - one element a word (float32 uniform with 24 bits, a dropout decision): group g fills elements
//   64g ... 64g + 63, element 64g + 16k + l taking word k of lane l;
// - one element a pair of words (float64 uniform with 53 bits): group g fills 32g ... 32g + 31,
//   element 32g + 16h + l taking words 2h and 2h + 1 of lane l;
// - normal: lane l's words 0-1 and 2-3 give 52-bit uniforms u1 in (0, 1], u2 in [0, 1), and their
//   Box-Muller pair (Note [Box-Muller without libm]) goes to elements 32g + l and 32g + 16 + l.
// A draw of n elements reserves whole groups, so the next draw starts at a fresh group. A scalar draw
// (uniform(), normal(), next_u64()) takes one block of its own. As PyTorch's and JAX's counter-based
// generators, the stream is not the one of mt19937 or of torch's CPU generator.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace xgrad {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : seed_(seed) {}
  /// The same seed and position: the copy's draws repeat the original's from here on.
  Generator(const Generator& other) noexcept : seed_(other.initial_seed()), offset_(other.offset()) {}
  Generator& operator=(const Generator& other) noexcept;
  /// Restarts the stream of `seed` from its beginning.
  void manual_seed(std::uint64_t seed);
  /// The seed of the stream (torch's Generator::initial_seed).
  std::uint64_t initial_seed() const { return seed_.load(std::memory_order_relaxed); }
  /// Blocks drawn so far.
  std::uint64_t offset() const { return offset_.load(std::memory_order_relaxed); }

  /// 64 random bits.
  std::uint64_t next_u64();
  /// Uniform on [0, 1) with 53 random bits.
  double uniform();
  /// Uniform on [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Standard normal (Box-Muller).
  double normal();
  /// Uniform integer in [0, n) (rejection sampling: unbiased). Errors: n = 0.
  std::uint64_t integer(std::uint64_t n);

  /// A reservation of blocks for a bulk draw: the blocks first, first + 1, ... of the stream `key`.
  struct Blocks {
    std::uint64_t key;
    std::uint64_t first;
  };
  /// Reserves `count` blocks (thread-safe: concurrent reservations get disjoint blocks).
  Blocks reserve(std::uint64_t count);

 private:
  std::atomic<std::uint64_t> seed_;
  std::atomic<std::uint64_t> offset_{0};
};

/// Shuffles v uniformly (Fisher-Yates from the back: for i = n - 1 down to 1, v[i] is swapped with
/// v[gen.integer(i + 1)]): the shuffle of every sampler and data split, the same order for the same
/// seed on every machine and compiler.
template <class T>
void shuffle(std::vector<T>& v, Generator& gen) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[gen.integer(i)]);
}

/// Moves k elements drawn uniformly without replacement to the front of v, in random order (a partial
/// Fisher-Yates shuffle from the front: for i < k, v[i] is swapped with v[i + gen.integer(n - i)]):
/// k draws, so choosing k of n costs O(k) after the n-element list. Requires k <= v.size().
template <class T>
void partial_shuffle(std::vector<T>& v, std::size_t k, Generator& gen) {
  for (std::size_t i = 0; i < k; ++i) std::swap(v[i], v[i + gen.integer(v.size() - i)]);
}

/// The process-wide generator that every layer, init function, dropout and random fill uses when it
/// is given no Generator or seed (torch's default CPU generator). Thread-safe to draw from; draws
/// from several threads at once interleave in no fixed order.
Generator& default_generator();
/// Reseeds the default generator (torch::manual_seed): the same program after the same seed draws the
/// same numbers, at any thread count.
void manual_seed(std::uint64_t seed);

/// What a module that draws at every forward (dropout masks) keeps of the generator it is built with:
/// nothing when that is the default generator (it then draws from the default generator at each
/// forward, as torch's modules do, so xgrad::manual_seed repeats its masks), else a generator of its
/// own seeded with one draw of `gen` (so that `gen` may die first).
inline std::optional<Generator> mask_generator(Generator& gen) {
  if (&gen == &default_generator()) return std::nullopt;
  return Generator(gen.next_u64());
}

/// A Generator of its own seeded with `seed`, or the default generator when there is no seed: what
/// a layer built with an optional seed draws from (`Linear(4, 8)` from the default generator, as
/// torch's; `Linear(4, 8, true, kFloat32, 7)` from a generator seeded with 7). Converts to Generator&,
/// valid while this object lives.
class SeedOrDefault {
 public:
  explicit SeedOrDefault(std::optional<std::uint64_t> seed) {
    if (seed) own_.emplace(*seed);
  }
  operator Generator&() { return own_ ? *own_ : default_generator(); }  // NOLINT(google-explicit-constructor)

 private:
  std::optional<Generator> own_;
};

}  // namespace xgrad
