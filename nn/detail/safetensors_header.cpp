// Note [Safetensors header scanner] (safetensors_header.hpp): a single-pass scanner for exactly the
// safetensors header schema.
#include "xgrad/nn/detail/safetensors_header.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include "xgrad/core/error.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace xgrad::detail {

std::string shown(std::string_view text) {
  constexpr std::size_t kMax = 64;
  std::string out;
  for (const char ch : text.substr(0, kMax)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += ch;
  }
  if (text.size() > kMax) out += fmt::format("...({} bytes)", text.size());
  return out;
}

namespace {

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::string_view kNotJson = "the header is not valid JSON";

// ---- SipHash-1-3 (Aumasson and Bernstein; the variant Rust's HashMap uses) -----------------------

inline std::uint64_t rotl(std::uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct SipState {
  std::uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
};

std::uint64_t siphash13(const std::uint64_t key[2], std::string_view s) {
  SipState st{0x736f6d6570736575ull ^ key[0], 0x646f72616e646f6dull ^ key[1], 0x6c7967656e657261ull ^ key[0],
              0x7465646279746573ull ^ key[1]};
  const char* p = s.data();
  const std::size_t n = s.size();
  const char* const whole_end = p + (n & ~std::size_t{7});
  for (; p != whole_end; p += 8) {
    std::uint64_t m;
    std::memcpy(&m, p, 8);  // little-endian host (static_assert in serialize.cpp)
    st.v3 ^= m;
    st.round();
    st.v0 ^= m;
  }
  std::uint64_t last = static_cast<std::uint64_t>(n) << 56;
  for (std::size_t i = 0; i < (n & 7); ++i)
    last |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  st.v3 ^= last;
  st.round();
  st.v0 ^= last;
  st.v2 ^= 0xff;
  st.round();
  st.round();
  st.round();
  return st.v0 ^ st.v1 ^ st.v2 ^ st.v3;
}

// A per-process random key, drawn once.
const std::array<std::uint64_t, 2>& process_hash_key() {
  static const std::array<std::uint64_t, 2> key = [] {
    std::uint64_t a = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    std::uint64_t b = reinterpret_cast<std::uintptr_t>(&a) * 0x9e3779b97f4a7c15ull;
    try {
      std::random_device rd;
      a ^= (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
      b ^= (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    } catch (...) {  // no entropy source: the clock and the stack address still vary per process
    }
    return std::array<std::uint64_t, 2>{a, b | 1};  // never {0, 0}, which means "random" to callers
  }();
  return key;
}

// The whole 2 MB pages inside [p, p + bytes), if they are 8 MB or more, offered to the kernel for
// transparent huge pages (Note [Reserved output]).
void advise_huge(const void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  if (bytes < 4 * kHuge) return;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t b = (at + kHuge - 1) & ~(kHuge - 1), e = (at + bytes) & ~(kHuge - 1);
  if (e > b) (void)madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

// ---- duplicate keys ------------------------------------------------------------------------------

// Note [Linear duplicate check]: the keys of one JSON object (the tensor names, or the metadata keys)
// are checked for duplicates once the object has been scanned. A hash table of millions of keys does
// not fit in the cache, and inserting into it costs a cache (and TLB) miss per key: that made the
// checks of a 4.5M-key "__metadata__" 3/4 of the scanner's time. Instead each key, as it is scanned,
// writes one 8-byte element (the top 32 bits of its hash, the tag, above its index in header order)
// and nothing else: no copy of the key, no offset; a key is read back from the output only when two
// tags match. The element goes straight into its part, chosen by the tag's top bits: before the
// object's first key the scanner knows a bound on its keys (Note [Reserved output]), so the parts,
// about kPartKeys keys each, get fixed places in one array, each with room for its expected keys and
// eight standard deviations more (a part that is full nonetheless spills into a list, checked with
// it). No pass over all the keys moves them afterwards. At the end of the object each part is checked
// with a table of at least twice its keys (64 KB for an average part, in the cache; a slot holds the
// tag, so a probe needs no second load). Work: one pass over the parts, an expected O(1) probes per
// key (the tables are at most half full), and one string comparison per pair of equal tags met in a
// probe (a true duplicate, or a chance collision of about 2^-(32 - log2 parts) per pair met).
constexpr std::size_t kPartKeys = 4096;

struct Duplicate {
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::size_t later = npos;    // the first key (in header order) equal to an earlier one
  std::size_t earlier = npos;  // the first key equal to it
  explicit operator bool() const { return later != npos; }
};

class DuplicateCheck {
 public:
  // Makes room for at least `most` keys (fewer is fine: the rest spills). The places take 8 bytes a
  // key of the bound plus the slack, and only the pages written to are faulted in (2 MB ones when the
  // array is advised for huge pages, advise_huge): at most about 2x the header's bytes even when the
  // bound is far above the keys there are (a metadata key takes at least 5 bytes of the header).
  void start(std::size_t most) {
    while ((most >> bits_) > kPartKeys && bits_ < 16) ++bits_;
    parts_ = std::size_t{1} << bits_;
    const std::size_t mean = most / parts_ + 1;
    cap_ = mean + 8 * static_cast<std::size_t>(std::sqrt(static_cast<double>(mean))) + 16;
    cap_ = (cap_ + kLine - 1) / kLine * kLine;  // each part starts on a cache line
    try {
      // Default-initialised: only the places written are read (and only they are faulted in).
      storage_.reset(new std::uint64_t[parts_ * cap_ + kLine]);
      const auto at = reinterpret_cast<std::uintptr_t>(storage_.get());
      elements_ = storage_.get() + ((64 - at % 64) % 64) / sizeof(std::uint64_t);
      staging_.reset(new std::uint64_t[parts_ * kLine + kLine]);
      const auto sat = reinterpret_cast<std::uintptr_t>(staging_.get());
      staged_ = staging_.get() + ((64 - sat % 64) % 64) / sizeof(std::uint64_t);
      fill_.assign(parts_, 0);
      advise_huge(elements_, parts_ * cap_ * sizeof(std::uint64_t));
    } catch (const std::bad_alloc&) {  // everything spills: one part, one table (still linear)
      bits_ = 0;
      parts_ = 1;
      cap_ = 0;
      storage_.reset();
      staging_.reset();
      elements_ = staged_ = nullptr;
      fill_.assign(1, 0);
    }
  }

  // The key with index `index` (in header order, below 2^32 - 1: the header is shorter than 4 GiB)
  // and SipHash `hash`. A part's elements are gathered a cache line at a time in a small staging
  // area (in the cache) and written to their place a whole line at once, past the cache: a store to
  // one of thousands of places at random would wait for its line to be read first.
  void add(std::uint64_t hash, std::size_t index) {
    const std::uint64_t e = (hash & 0xffffffff00000000ull) | static_cast<std::uint64_t>(index);
    const std::size_t q = part_of(e);
    const std::size_t k = fill_[q];
    ++n_;
    if (k >= cap_) {
      spilled_.push_back(e);
      return;
    }
    staged_[q * kLine + k % kLine] = e;
    fill_[q] = static_cast<std::uint32_t>(k + 1);
    if (k % kLine == kLine - 1) write_line(elements_ + q * cap_ + (k + 1 - kLine), staged_ + q * kLine);
  }

  // The first key in header order equal to an earlier one, and the first key equal to it;
  // key_at(i) is key i.
  template <class KeyAt>
  Duplicate first(KeyAt&& key_at, SafetensorsScanCounters& counters) {
    counters.keys += n_;
    counters.rehashed += n_;
    Duplicate dup;
    if (n_ < 2) return dup;
    for (std::size_t q = 0; q < parts_ && cap_ > 0; ++q) {  // the lines not full yet
      const std::size_t k = std::min<std::size_t>(fill_[q], cap_);
      std::copy_n(staged_ + q * kLine, k % kLine, elements_ + q * cap_ + (k - k % kLine));
    }
#if defined(__AVX2__)
    _mm_sfence();  // the streamed lines are visible to the loads below
#endif
    // The spilled keys by part (normally none; in header order within a part).
    if (parts_ > 1)  // one part (the fallback without places): already in order, and linear
      std::stable_sort(spilled_.begin(), spilled_.end(),
                       [&](std::uint64_t a, std::uint64_t b) { return part_of(a) < part_of(b); });
    std::size_t s = 0;
    // A slot holds an element plus one, 0 for empty: a probe compares tags without a second load.
    // Two keys are compared as strings when their tags are equal; the slot is the tag's low bits.
    // A match of the key being inserted with a slot's key gives the pair (the later, the earlier) of
    // the two, and the slot keeps the earlier. Whatever the order of insertion, the smallest `later`
    // over all matches is then the second-smallest index of its group of equal keys, met with the
    // smallest one (when the later of those two went in, the slot held the smallest index before it).
    std::vector<std::uint64_t> table;
    for (std::size_t q = 0; q < parts_; ++q) {
      const std::uint64_t* const in_place = elements_ + q * cap_;
      const std::size_t s_end =
          static_cast<std::size_t>(std::find_if(spilled_.begin() + static_cast<std::ptrdiff_t>(s), spilled_.end(),
                                                [&](std::uint64_t e) { return part_of(e) != q; }) -
                                   spilled_.begin());
      const std::size_t m = fill_[q] + (s_end - s);
      if (m < 2) {
        s = s_end;
        continue;
      }
      std::size_t size = 16;
      while (size < 2 * m) size *= 2;
      table.assign(size, 0);
      const std::size_t mask = size - 1;
      for (std::size_t k = 0; k < m; ++k) {
        const std::uint64_t key = k < fill_[q] ? in_place[k] : spilled_[s + (k - fill_[q])];
        const std::uint32_t tag = static_cast<std::uint32_t>(key >> 32);
        for (std::size_t pos = tag & mask;; pos = (pos + 1) & mask) {
          ++counters.probes;
          const std::uint64_t slot = table[pos];
          if (slot == 0) {
            table[pos] = key + 1;  // the index is below 2^32 - 1: no carry into the tag
            break;
          }
          const std::uint64_t other = slot - 1;
          if ((other >> 32) != tag) continue;
          const std::size_t key_index = static_cast<std::uint32_t>(key),
                            other_index = static_cast<std::uint32_t>(other);
          const std::string_view x = key_at(other_index), y = key_at(key_index);
          counters.bytes_compared += std::min(x.size(), y.size());
          if (x == y) {
            const std::size_t later = std::max(key_index, other_index), earlier = std::min(key_index, other_index);
            if (later < dup.later) dup = Duplicate{later, earlier};
            if (key_index < other_index) table[pos] = key + 1;
            break;
          }
        }
      }
      s = s_end;
    }
    return dup;
  }

 private:
  std::size_t part_of(std::uint64_t e) const {
    return bits_ == 0 ? std::size_t{0} : static_cast<std::size_t>(e >> (64 - bits_));
  }
  static constexpr std::size_t kLine = 64 / sizeof(std::uint64_t);  // elements in a cache line

  // 64 bytes from `from` to `to` (both 64-byte aligned), with streaming stores where there are.
  static void write_line(std::uint64_t* to, const std::uint64_t* from) {
#if defined(__AVX2__)
    const auto* src = reinterpret_cast<const __m256i*>(from);
    auto* dst = reinterpret_cast<__m256i*>(to);
    _mm256_stream_si256(dst, _mm256_load_si256(src));
    _mm256_stream_si256(dst + 1, _mm256_load_si256(src + 1));
#else
    std::copy_n(from, kLine, to);
#endif
  }

  int bits_ = 0;
  std::size_t parts_ = 1, cap_ = 0, n_ = 0;
  std::unique_ptr<std::uint64_t[]> storage_, staging_;
  std::uint64_t* elements_ = nullptr;  // part q at [q * cap_, q * cap_ + fill_[q]), 64-byte aligned
  std::uint64_t* staged_ = nullptr;    // part q's line being filled at [q * kLine, (q + 1) * kLine)
  std::vector<std::uint32_t> fill_ = std::vector<std::uint32_t>(1, 0);
  std::vector<std::uint64_t> spilled_;  // keys whose part was full, in header order
};

// Bytes that stand for themselves in a JSON string: printable ASCII except '"' and '\'.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x80; ++c) t[c] = c != '"' && c != '\\';
  return t;
}();

bool is_digit(int c) { return c >= '0' && c <= '9'; }

// Note [Reserved output]: the output arrays are reserved once, from a count of the header's ':' bytes
// (a key is followed by one, so there are at most that many keys; an entry has four, its name's and
// its fields'), instead of grown by doubling. Growth copies each array about once more and
// page-faults the copies into fresh memory: a fifth of the scan of a 4.5M-key "__metadata__". The
// count is one vectorised pass over the header (a small fraction of the scan; bench/results/tuning_notes.md),
// made when the first entry or
// the metadata begins. The bound is also capped by the bytes left (a metadata key and value take at
// least 5, an entry 45), so ':' inside strings cannot inflate it. A reservation only takes address
// space, and pages are touched as they are written; one the system refuses is skipped (the arrays
// then grow as before).
// A large reservation is also offered to the kernel for transparent huge pages (madvise, where the
// system leaves it to the program): its pages are then faulted in 2 MB at a time, not 4 KB, and a
// quarter of the scan of a 4.5M-key "__metadata__" was page faults. Only the address range is
// advised: nothing is touched, and a refusal changes nothing.
template <class Container>
void try_reserve(Container& c, std::size_t n) {
  try {
    c.reserve(n);
  } catch (const std::exception&) {  // std::bad_alloc, std::length_error: grow instead
    return;
  }
  advise_huge(c.data(), c.capacity() * sizeof(*c.data()));
}

struct Number {
  const char* begin = nullptr;
  const char* end = nullptr;
  bool negative = false;
  bool integral = true;   // no fraction, no exponent
  bool overflow = false;  // the integer part does not fit in 64 bits
  std::uint64_t value = 0;
  std::string_view text() const { return {begin, static_cast<std::size_t>(end - begin)}; }
};

class Scanner {
 public:
  Scanner(std::string_view text, const std::string& src, const SafetensorsScanOptions& options)
      : begin_(text.data()),
        p_(text.data()),
        end_(text.data() + text.size()),
        src_(src),
        options_(options),
        hash_key_{options.hash_key[0], options.hash_key[1]},
        counters_(options.counters ? *options.counters : own_counters_),
        key_{key_or_random()[0], key_or_random()[1]} {}

  SafetensorsHeader run() {
    // Offsets in the metadata arena are 32-bit (decoded text is never longer than its JSON).
    if (end_ - begin_ >= (std::ptrdiff_t{1} << 32))
      fail_at(begin_, fmt::format("the header has {} bytes (at most 4 GiB are supported)", end_ - begin_));
    ws();
    if (peek() != '{') fail(p_, "the header does not start with '{'", "'{'");
    ++p_;
    ws();
    if (peek() == '}') {
      ++p_;
    } else {
      for (;;) {
        if (peek() != '"') fail(p_, kNotJson, "a tensor name or \"__metadata__\" in double quotes");
        const char* key_at = p_;
        // Decoded straight into the arena of names (an entry's name stays there).
        const std::size_t key_offset = out_.text.size();
        string(out_.text, "a tensor name");
        ws();
        expect(':', "':' after a name");
        ws();
        if (std::string_view(out_.text).substr(key_offset) == kMetadataKey) {
          out_.text.resize(key_offset);
          if (seen_metadata_)
            fail_at(key_at, fmt::format("duplicate name '__metadata__' in the header (the first is at byte {})",
                                        offset(metadata_at_)));
          seen_metadata_ = true;
          metadata_at_ = key_at;
          metadata();
        } else {
          entry(key_at, key_offset);
        }
        ws();
        const int c = peek();
        if (c == ',') {
          ++p_;
          ws();
          continue;
        }
        if (c == '}') {
          ++p_;
          break;
        }
        fail(p_, kNotJson, "',' or '}' after a top-level value");
      }
    }
    const auto& entries = out_.entries;
    if (const Duplicate d = names_.first([&](std::size_t i) { return out_.name(entries[i]); }, counters_))
      fail_at(begin_ + (entries[d.later].at - options_.file_offset),
              fmt::format("duplicate name '{}' in the header (the first is at byte {})",
                          shown(out_.name(entries[d.later])), entries[d.earlier].at));
    ws();
    if (p_ != end_) fail(p_, kNotJson, "only whitespace after the header's closing '}'");
    return std::move(out_);
  }

 private:
  const std::uint64_t* key_or_random() const {
    return (hash_key_[0] | hash_key_[1]) ? hash_key_ : process_hash_key().data();
  }

  // The header's ':' bytes, at least its keys (Note [Reserved output]); counted when first asked for,
  // so that a header refused at its first bytes is not read to its end.
  std::size_t keys_bound() {
    if (keys_bound_ == static_cast<std::size_t>(-1)) keys_bound_ = count_colons();
    return keys_bound_;
  }

  // The ':' bytes of the header (Note [Reserved output]): blocks of 4 KB counted into 32-bit lanes, a
  // loop the compiler vectorises (a 64-bit count would halve its width).
  std::size_t count_colons() const {
    std::size_t n = 0;
    const auto* b = reinterpret_cast<const unsigned char*>(begin_);
    const std::size_t size = static_cast<std::size_t>(end_ - begin_);
    for (std::size_t i = 0; i < size;) {
      const std::size_t stop = std::min(size, i + 4096);
      std::uint32_t block = 0;
      for (; i < stop; ++i) block += b[i] == ':';
      n += block;
    }
    return n;
  }

  int peek() const { return p_ < end_ ? static_cast<unsigned char>(*p_) : -1; }
  std::uint64_t offset(const char* at) const { return options_.file_offset + static_cast<std::uint64_t>(at - begin_); }
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  void expect(char c, std::string_view expected) {
    if (peek() != c) fail(p_, kNotJson, expected);
    ++p_;
  }

  // What is at `at`, for a message.
  std::string found(const char* at) const {
    if (at >= end_) return "the end of the header";
    const auto c = static_cast<unsigned char>(*at);
    if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
    return fmt::format("byte 0x{:02x}", c);
  }
  // `found` overrides what is shown as found (e.g. a whole key). A header that ends where a value
  // should be is not valid JSON, whatever the value should have been.
  [[noreturn]] void fail(const char* at, std::string_view what, std::string_view expected,
                         std::string_view found_instead = {}) const {
    detail::throw_error(
        fmt::format("load_safetensors: '{}' is not a valid safetensors file: {} (at byte {}: expected {}, found {})",
                    src_, at >= end_ ? kNotJson : what, offset(at), expected,
                    found_instead.empty() ? found(at) : std::string(found_instead)));
  }
  // For errors that are not about one unexpected byte (a duplicate, a missing field).
  [[noreturn]] void fail_at(const char* at, std::string_view what) const {
    detail::throw_error(
        fmt::format("load_safetensors: '{}' is not a valid safetensors file: {} (at byte {})", src_, what, offset(at)));
  }

  // ---- strings ----

  // Appends the string at p_ (which is '"') to `out`, unescaped. `what` names it in messages.
  void string(std::string& out, std::string_view what) {
    const char* const open = p_;
    ++p_;
    for (;;) {
      const char* run = p_;
      skip_plain_words();
      while (p_ < end_ && kPlain[static_cast<unsigned char>(*p_)]) ++p_;
      out.append(run, static_cast<std::size_t>(p_ - run));  // (pointer, size): no aliasing checks
      if (p_ == end_) fail(p_, kNotJson, fmt::format("'\"' closing {} that starts at byte {}", what, offset(open)));
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return;
      }
      if (c == '\\') {
        escape(out);
      } else if (c < 0x20) {
        fail(p_, kNotJson, "a string character (control characters must be escaped in JSON strings)");
      } else {
        utf8(out);
      }
    }
  }

  // Skips 8 bytes at a time while none of them needs a look (a quote, a backslash, a control
  // character or a non-ASCII byte); the byte loop after it finds which one does. The tests have no
  // false negatives (a word with such a byte is never skipped), only false positives.
  void skip_plain_words() {
    constexpr std::uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
    auto has_zero = [](std::uint64_t x) { return (x - kOnes) & ~x & kHigh; };
    while (end_ - p_ >= 8) {
      std::uint64_t v;
      std::memcpy(&v, p_, 8);
      const std::uint64_t special =
          has_zero(v ^ (kOnes * '"')) | has_zero(v ^ (kOnes * '\\')) | ((v - kOnes * 0x20) & ~v & kHigh) | (v & kHigh);
      if (special) {
        // The lowest flagged byte is exact (a borrow only runs upwards, from a flagged byte): the
        // first byte that needs a look, so the byte loop after this does not re-read the word.
        p_ += std::countr_zero(special) >> 3;
        return;
      }
      p_ += 8;
    }
  }

  // p_ at '\'.
  void escape(std::string& out) {
    const char* const at = p_;
    ++p_;
    const int c = peek();
    char plain = 0;
    switch (c) {
      case '"':
        plain = '"';
        break;
      case '\\':
        plain = '\\';
        break;
      case '/':
        plain = '/';
        break;
      case 'b':
        plain = '\b';
        break;
      case 'f':
        plain = '\f';
        break;
      case 'n':
        plain = '\n';
        break;
      case 'r':
        plain = '\r';
        break;
      case 't':
        plain = '\t';
        break;
      case 'u':
        break;
      default:
        fail(p_, fmt::format("{}: invalid escape in a string at byte {}", kNotJson, offset(at)),
             "one of \" \\ / b f n r t u after '\\'");
    }
    if (c != 'u') {
      out.push_back(plain);
      ++p_;
      return;
    }
    ++p_;
    std::uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF)
      fail(at, fmt::format("{}: \\u{:04X} is a low surrogate without a high surrogate before it", kNotJson, cp),
           "a code point that is not a lone surrogate");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      const char* const low_at = p_;
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u')
        fail(p_, fmt::format("{}: \\u{:04X} is a high surrogate not followed by a low one", kNotJson, cp),
             "'\\u' and a low surrogate (DC00-DFFF)");
      p_ += 2;
      const std::uint32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF)
        fail(low_at, fmt::format("{}: \\u{:04X} is a high surrogate followed by \\u{:04X}", kNotJson, cp, low),
             "a low surrogate (DC00-DFFF)");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    // UTF-8 encoding of cp.
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  std::uint32_t hex4() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int c = peek();
      int d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        fail(p_, kNotJson, "a hexadecimal digit of a \\u escape");
      v = v * 16 + static_cast<std::uint32_t>(d);
      ++p_;
    }
    return v;
  }

  // One multi-byte UTF-8 sequence at p_ (first byte >= 0x80), validated (no overlong forms, no
  // surrogates, nothing above U+10FFFF) and appended.
  void utf8(std::string& out) {
    const auto b0 = static_cast<unsigned char>(*p_);
    int n;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      n = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      n = 2;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      n = 3;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    } else {
      fail(p_, fmt::format("{}: invalid UTF-8", kNotJson), "the first byte of a UTF-8 sequence");
    }
    for (int i = 1; i <= n; ++i) {
      const int c = p_ + i < end_ ? static_cast<unsigned char>(p_[i]) : -1;
      const int l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
      if (c < l || c > h)
        fail(p_ + i, fmt::format("{}: invalid UTF-8 (sequence starting at byte {})", kNotJson, offset(p_)),
             "a continuation byte of a UTF-8 sequence");
    }
    out.append(p_, static_cast<std::size_t>(n + 1));
    p_ += n + 1;
  }

  // ---- numbers ----

  // The JSON number at p_ (whose first byte is '-' or a digit).
  Number number() {
    Number n;
    n.begin = p_;
    if (peek() == '-') {
      n.negative = true;
      ++p_;
    }
    if (!is_digit(peek())) fail(p_, kNotJson, "a digit");
    if (*p_ == '0') {
      ++p_;
    } else {
      while (is_digit(peek())) {
        const auto d = static_cast<std::uint64_t>(*p_ - '0');
        if (n.value > (std::numeric_limits<std::uint64_t>::max() - d) / 10)
          n.overflow = true;
        else if (!n.overflow)
          n.value = n.value * 10 + d;
        ++p_;
      }
    }
    if (peek() == '.') {
      n.integral = false;
      ++p_;
      if (!is_digit(peek())) fail(p_, kNotJson, "a digit after the decimal point");
      while (is_digit(peek())) ++p_;
    }
    if (peek() == 'e' || peek() == 'E') {
      n.integral = false;
      ++p_;
      if (peek() == '+' || peek() == '-') ++p_;
      if (!is_digit(peek())) fail(p_, kNotJson, "a digit of the exponent");
      while (is_digit(peek())) ++p_;
    }
    n.end = p_;
    return n;
  }

  // ---- the schema ----

  void metadata() {
    if (peek() != '{') fail(p_, "'__metadata__' is not a JSON object", "'{'");
    ++p_;
    ws();
    if (peek() == '}') {
      ++p_;
      return;
    }
    auto& meta = out_.metadata;
    std::string& text = out_.metadata_text;
    const char* const first = p_;  // the first key's '"', to find a duplicate key again (key_position)
    DuplicateCheck keys;
    // Note [Reserved output]. Decoded text is never longer than its JSON.
    // A key and its value take at least 5 bytes ("":""), whatever ':' the strings hold.
    const std::size_t most = std::min(keys_bound(), static_cast<std::size_t>(end_ - p_) / 5 + 1);
    try_reserve(meta, most);
    keys.start(most);
    try_reserve(text, static_cast<std::size_t>(end_ - p_));
    for (;;) {
      if (peek() != '"') fail(p_, kNotJson, "a key of '__metadata__' in double quotes");
      SafetensorsMetadataEntry m;
      m.key_offset = static_cast<std::uint32_t>(text.size());
      string(text, "a key of '__metadata__'");
      m.value_offset = static_cast<std::uint32_t>(text.size());  // the value follows its key (Item)
      const std::string_view key(text.data() + m.key_offset, m.value_offset - m.key_offset);
      counters_.bytes_hashed += key.size();
      keys.add(siphash13(key_, key), meta.size());
      ws();
      expect(':', "':' after a key of '__metadata__'");
      ws();
      if (peek() != '"') fail(p_, fmt::format("'__metadata__' value of '{}' is not a string", shown(key)), "'\"'");
      string(text, "a value of '__metadata__'");
      meta.push_back(m);
      ws();
      const int c = peek();
      if (c == ',') {
        ++p_;
        ws();
        continue;
      }
      if (c == '}') {
        ++p_;
        break;
      }
      fail(p_, kNotJson, "',' or '}' after a value of '__metadata__'");
    }
    if (const Duplicate d = keys.first([&](std::size_t i) { return out_.key(meta[i]); }, counters_))
      fail_at(key_position(first, d.later),
              fmt::format("duplicate key '{}' in '__metadata__'", shown(out_.key(meta[d.later]))));
  }

  // The opening quote of key `index` of the object whose first key's quote is at `first`, scanned
  // before without an error (for the message of a duplicate: no offset is kept per key).
  const char* key_position(const char* first, std::size_t index) const {
    const char* q = first;
    const auto skip_ws = [&] {
      while (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t') ++q;
    };
    const auto skip_string = [&] {  // q at '"'; after it, q is past the closing '"'
      for (++q; *q != '"'; ++q)
        if (*q == '\\') ++q;
      ++q;
    };
    for (std::size_t i = 0;; ++i) {
      skip_ws();
      if (i == index) return q;
      skip_string();
      skip_ws();
      ++q;  // ':'
      skip_ws();
      skip_string();
      skip_ws();
      ++q;  // ','
    }
  }

  // The tensor's name is out_.text[name_offset:], p_ is at its value.
  void entry(const char* name_at, std::size_t name_offset) {
    auto& entries = out_.entries;
    if (entries.empty()) {  // Note [Reserved output]: four ':' an entry; names and dtypes are text of the header
      // An entry takes at least 45 bytes ("":{"dtype":"","shape":[],"data_offsets":[0,0]}).
      const std::size_t most = std::min(keys_bound() / 4, static_cast<std::size_t>(end_ - p_) / 45) + 1;
      try_reserve(entries, most);
      names_.start(most);
      try_reserve(out_.dims, most);
      try_reserve(out_.text, static_cast<std::size_t>(end_ - begin_));
    }
    const std::string_view name = std::string_view(out_.text).substr(name_offset);
    counters_.bytes_hashed += name.size();
    names_.add(siphash13(key_, name), entries.size());
    if (peek() != '{')
      fail(p_,
           fmt::format("the header entry of tensor '{}' is not a JSON object",
                       shown(std::string_view(out_.text).substr(name_offset))),
           "'{'");
    entries.emplace_back();
    SafetensorsHeaderEntry& e = entries.back();
    e.name_offset = static_cast<std::uint32_t>(name_offset);
    e.name_size = static_cast<std::uint32_t>(out_.text.size() - name_offset);
    e.at = offset(name_at);
    ++p_;
    ws();
    constexpr unsigned kDtype = 1, kShape = 2, kOffsets = 4;
    unsigned seen = 0;
    const char* close = p_;
    if (peek() != '}') {
      for (;;) {
        if (peek() != '"')
          fail(p_, kNotJson, fmt::format("a field name of tensor '{}' in double quotes", shown(out_.name(e))));
        const char* field_at = p_;
        field_.clear();
        string(field_, "a field name");
        const std::string_view fv = field_;  // string_view ==: sizes first, then bytes
        const unsigned f = fv == "dtype" ? kDtype : fv == "shape" ? kShape : fv == "data_offsets" ? kOffsets : 0;
        if (f == 0)
          fail(field_at,
               fmt::format("the header entry of tensor '{}' has an unknown field '{}'", shown(out_.name(e)),
                           shown(field_)),
               "\"dtype\", \"shape\" or \"data_offsets\"", fmt::format("\"{}\"", shown(field_)));
        if (seen & f)
          fail_at(field_at,
                  fmt::format("duplicate key '{}' in the header entry of tensor '{}'", field_, shown(out_.name(e))));
        seen |= f;
        ws();
        expect(':', "':' after a field name");
        ws();
        if (f == kDtype) {
          if (peek() != '"')
            fail(p_, fmt::format("the 'dtype' of tensor '{}' is not a string", shown(out_.name(e))), "'\"'");
          e.dtype_offset = static_cast<std::uint32_t>(out_.text.size());
          string(out_.text, "a dtype");
          e.dtype_size = static_cast<std::uint32_t>(out_.text.size() - e.dtype_offset);
        } else if (f == kShape) {
          shape(e);
        } else {
          data_offsets(e);
        }
        ws();
        const int c = peek();
        if (c == ',') {
          ++p_;
          ws();
          continue;
        }
        if (c == '}') break;
        fail(p_, kNotJson, fmt::format("',' or '}}' in the header entry of tensor '{}'", shown(out_.name(e))));
      }
      close = p_;
    }
    ++p_;
    for (auto [bit, field] : {std::pair{kDtype, "dtype"}, {kShape, "shape"}, {kOffsets, "data_offsets"}})
      if (!(seen & bit)) fail_at(close, fmt::format("tensor '{}' has no '{}' field", shown(out_.name(e)), field));
  }

  void shape(SafetensorsHeaderEntry& e) {
    if (peek() != '[') fail(p_, fmt::format("the 'shape' of tensor '{}' is not an array", shown(out_.name(e))), "'['");
    ++p_;
    e.dims_offset = static_cast<std::uint32_t>(out_.dims.size());
    ws();
    if (peek() == ']') {
      ++p_;
      return;
    }
    for (;;) {
      const int c = peek();
      if (c == '[' || c == '{')
        fail(p_, "the JSON header is nested deeper than the format allows", "a dimension (a non-negative integer)");
      if (c != '-' && !is_digit(c))
        fail(p_,
             fmt::format("the shape of tensor '{}' has a dimension that is not a non-negative integer",
                         shown(out_.name(e))),
             "a non-negative integer");
      if (e.dims_size == options_.max_dims)
        fail_at(p_, fmt::format("the shape of tensor '{}' has more than {} dimensions", shown(out_.name(e)),
                                options_.max_dims));
      const Number n = number();
      if (!n.integral)
        fail(n.begin,
             fmt::format("the shape of tensor '{}' has a dimension that is not a non-negative integer: {}",
                         shown(out_.name(e)), shown(n.text())),
             "a non-negative integer");
      if (n.overflow)
        fail(n.begin,
             fmt::format("number overflow: a dimension of tensor '{}' ({}) does not fit in 64 bits",
                         shown(out_.name(e)), shown(n.text())),
             "a non-negative integer below 2^63");
      if (n.negative && n.value != 0)
        fail(n.begin,
             fmt::format("the shape of tensor '{}' has a negative dimension -{}", shown(out_.name(e)), n.value),
             "a non-negative integer");
      if (n.value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(n.begin,
             fmt::format("the shape of tensor '{}' has a dimension {} that overflows int64", shown(out_.name(e)),
                         n.value),
             "a non-negative integer below 2^63");
      out_.dims.push_back(static_cast<std::int64_t>(n.value));
      ++e.dims_size;
      ws();
      const int d = peek();
      if (d == ',') {
        ++p_;
        ws();
        continue;
      }
      if (d == ']') {
        ++p_;
        return;
      }
      fail(p_, kNotJson, fmt::format("',' or ']' in the shape of tensor '{}'", shown(out_.name(e))));
    }
  }

  void data_offsets(SafetensorsHeaderEntry& e) {
    // Built only on the error path: the common path allocates nothing per entry.
    const auto what = [&] {
      return fmt::format("the 'data_offsets' of tensor '{}' are not two non-negative integers", shown(out_.name(e)));
    };
    if (peek() != '[') fail(p_, what(), "'['");
    ++p_;
    ws();
    std::uint64_t v[2];
    for (int i = 0; i < 2; ++i) {
      const int c = peek();
      if (c != '-' && !is_digit(c))
        fail(p_, what(), i == 0 ? "a non-negative integer" : "a second non-negative integer");
      const Number n = number();
      if (!n.integral) fail(n.begin, what(), "a non-negative integer");
      if (n.overflow)
        fail(n.begin,
             fmt::format("number overflow: a data offset of tensor '{}' ({}) does not fit in 64 bits",
                         shown(out_.name(e)), shown(n.text())),
             "a non-negative integer below 2^64");
      if (n.negative && n.value != 0) fail(n.begin, what(), "a non-negative integer");
      v[i] = n.value;
      ws();
      if (i == 0) {
        if (peek() != ',') fail(p_, what(), "','");
        ++p_;
        ws();
      }
    }
    if (peek() != ']') fail(p_, what(), "']' after two offsets");
    ++p_;
    e.begin = v[0];
    e.end = v[1];
  }

  const char* const begin_;
  const char* p_;
  const char* const end_;
  const std::string& src_;
  const SafetensorsScanOptions& options_;
  const std::uint64_t hash_key_[2];
  SafetensorsScanCounters own_counters_;
  SafetensorsScanCounters& counters_;
  const std::uint64_t key_[2];                             // the SipHash key
  DuplicateCheck names_;                                   // of the entries' names
  std::size_t keys_bound_ = static_cast<std::size_t>(-1);  // see keys_bound()
  bool seen_metadata_ = false;
  const char* metadata_at_ = nullptr;
  std::string field_;  // a reused buffer
  SafetensorsHeader out_;
};

}  // namespace

SafetensorsHeader scan_safetensors_header(std::string_view header, const std::string& src,
                                          const SafetensorsScanOptions& options) {
  return Scanner(header, src, options).run();
}

}  // namespace xgrad::detail
