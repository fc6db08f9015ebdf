#include "xgrad/distributed/zero.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <type_traits>

#include "xgrad/core/autograd.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/distributed/detail/process_group.hpp"
#include "xgrad/distributed/distributed.hpp"
#include "xgrad/nn/serialize.hpp"

namespace xgrad::distributed {

namespace {
// Note [Ring reduce-scatter]: Open MPI 4.1's MPI_Reduce_scatter of a 5.8M-parameter MLP's gradients at
// 2 ranks took about twice as long as an MPI_Allreduce of all of them (bench/ddp_allreduce.cpp;
// bench/results/tuning_notes.md, "ZeRO's ring reduce-scatter"),
// so step() runs the ring algorithm itself: in step s = 0 .. W-2 rank r sends its running sum of
// share (r - s - 1) mod W to rank r + 1 and adds what rank r - 1 sends of share (r - s - 2) mod W into
// its own; after W - 1 steps share r holds the sum of every rank's on rank r. Each element is summed
// once along the ring, so the result does not depend on timing; with 2 ranks it is a + b, the sum
// MPI_Allreduce gives, bit for bit. Each step's messages are non-blocking and completed against the
// step()'s deadline (Note [Waiting in collectives] in process_group.cpp).
template <class T>
void ring_reduce_scatter(T* data, const std::vector<int>& counts, const std::vector<int>& displs, int me, int n,
                         std::vector<T>& scratch, const std::string& what, detail::Clock::time_point start) {
  const MPI_Datatype type = std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (int s = 0; s + 1 < n; ++s) {
    const auto send = static_cast<std::size_t>(((me - s - 1) % n + n) % n);
    const auto recv = static_cast<std::size_t>(((me - s - 2) % n + n) % n);
    scratch.resize(static_cast<std::size_t>(counts[recv]));
    std::vector<MPI_Request> reqs(2, MPI_REQUEST_NULL);
    detail::mpi(MPI_Irecv, scratch.data(), counts[recv], type, prev, 7100 + s, MPI_COMM_WORLD, &reqs[0]);
    detail::mpi(MPI_Isend, data + displs[send], counts[send], type, next, 7100 + s, MPI_COMM_WORLD, &reqs[1]);
    detail::wait_transfer(
        reqs, fmt::format("{}: MPI_Isend/MPI_Irecv of the ring reduce-scatter (step {} of {})", what, s + 1, n - 1),
        start);
    T* own = data + displs[recv];
    for (int e = 0; e < counts[recv]; ++e) own[e] += scratch[static_cast<std::size_t>(e)];
  }
}
}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Tensor> params, Factory make_optimizer)
    : params_(std::move(params)) {
  constexpr const char* op = "ZeroRedundancyOptimizer";
  XGRAD_CHECK(!params_.empty(), "{}: argument 'params' is empty", op);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    XGRAD_CHECK(params_[i].defined(), "{}: parameter {} is undefined", op, i);
    XGRAD_CHECK(params_[i].dtype() == kFloat32 || params_[i].dtype() == kFloat64,
                "{}: parameter {} must be float32 or float64, got {}", op, i, params_[i].dtype());
  }
  XGRAD_CHECK(static_cast<bool>(make_optimizer), "{}: argument 'make_optimizer' is empty", op);
  XGRAD_CHECK(is_initialized(), "{}: MPI is not initialised (create an xgrad::distributed::MpiContext in main first)",
              op);
  // The same parameters everywhere, rank 0's values: DistributedDataParallel's checks and broadcast.
  {
    DdpOptions check_only;  // no hooks, no communicator: only the check and the broadcast
    check_only.overlap = false;
    DistributedDataParallel check(params_, check_only);
  }
  const int n = world_size(), me = rank();
  for (Dtype d : {kFloat32, kFloat64}) {
    Flat f{d, {}, std::vector<int>(static_cast<std::size_t>(n)), std::vector<int>(static_cast<std::size_t>(n)), {}, 0};
    std::int64_t total = 0;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].dtype() == d) {
        f.params.push_back(i);
        total += params_[i].numel();
      }
    if (total == 0) continue;
    XGRAD_CHECK(total <= INT_MAX, "{}: the {} parameters have {} elements, beyond MPI's int counts", op, d, total);
    for (int r = 0; r < n; ++r) {
      const std::int64_t lo = total * r / n, hi = total * (r + 1) / n;
      f.displs[static_cast<std::size_t>(r)] = static_cast<int>(lo);
      f.counts[static_cast<std::size_t>(r)] = static_cast<int>(hi - lo);
    }
    const std::int64_t lo = f.displs[static_cast<std::size_t>(me)], hi = lo + f.counts[static_cast<std::size_t>(me)];
    f.first_piece = pieces_.size();
    std::int64_t at = 0;  // flat offset of the current parameter
    for (std::size_t i : f.params) {
      const std::int64_t m = params_[i].numel(), a = std::max(lo, at), b = std::min(hi, at + m);
      if (a < b) {
        f.pieces.push_back({i, a - at, b - a});
        Tensor piece = Tensor::empty({b - a}, d);
        std::memcpy(piece.impl()->storage->data,
                    static_cast<const unsigned char*>(params_[i].impl()->storage->data) +
                        static_cast<std::size_t>(a - at) * dtype_size(d),
                    static_cast<std::size_t>(b - a) * dtype_size(d));
        pieces_.push_back(piece.set_requires_grad());
      }
      at += m;
    }
    flats_.push_back(std::move(f));
  }
  if (!pieces_.empty()) {
    local_ = make_optimizer(pieces_);
    XGRAD_CHECK(local_ != nullptr, "{}: 'make_optimizer' returned null", op);
    XGRAD_CHECK(local_->name() != "LBFGS",
                "{}: LBFGS is not elementwise (its directions use whole-vector dot products); shard an elementwise "
                "optimizer (SGD, Adam, AdamW, RMSprop, Adagrad)",
                op);
  }
  check_same_optimizer();
}

// Every rank's wrapped optimizer must be the same kind with the same options (a rank with another
// learning rate would update its share differently): the descriptions are all-gathered, so every rank
// throws the same error naming the first differing option and both values.
void ZeroRedundancyOptimizer::check_same_optimizer() const {
  constexpr const char* op = "ZeroRedundancyOptimizer";
  std::vector<std::string> mine;  // "kind", then "option=value" per option
  if (local_) {
    mine.push_back(local_->name());
    for (const auto& [key, t] : local_->state_dict())
      if (key.rfind("param_groups.", 0) == 0 && key.find(".num_params") == std::string::npos)
        mine.push_back(fmt::format("{}={}", key.substr(13), t.item()));  // shortest round trip
  }
  std::string text;
  for (const std::string& m : mine) text += m + '\n';
  const int n = detail::world_size_raw(), len = static_cast<int>(text.size());
  const std::string what = "ZeroRedundancyOptimizer (construction): MPI_Iallgather of the wrapped optimizers' options";
  std::vector<int> lens(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  MPI_Request req;
  detail::mpi(MPI_Iallgather, &len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &req);
  detail::wait_collective(req, what);
  int total = 0;
  for (int r = 0; r < n; ++r) {
    displs[static_cast<std::size_t>(r)] = total;
    total += lens[static_cast<std::size_t>(r)];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  detail::mpi(MPI_Iallgatherv, text.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
              MPI_COMM_WORLD, &req);
  detail::wait_collective(req, what);
  int ref = -1;
  std::vector<std::string> ref_lines;
  for (int r = 0; r < n; ++r) {
    const std::string theirs = all.substr(static_cast<std::size_t>(displs[static_cast<std::size_t>(r)]),
                                          static_cast<std::size_t>(lens[static_cast<std::size_t>(r)]));
    if (theirs.empty()) continue;  // a rank with an empty share has no optimizer
    std::vector<std::string> lines;
    for (std::size_t at = 0, nl; (nl = theirs.find('\n', at)) != std::string::npos; at = nl + 1)
      lines.push_back(theirs.substr(at, nl - at));
    if (ref < 0) {
      ref = r;
      ref_lines = std::move(lines);
      continue;
    }
    if (lines == ref_lines) continue;
    std::size_t i = 0;
    while (i < lines.size() && i < ref_lines.size() && lines[i] == ref_lines[i]) ++i;
    XGRAD_CHECK(false,
                "{}: the ranks' wrapped optimizers differ (each rank must build the same optimizer with the same "
                "options): rank {} has '{}', rank {} has '{}'",
                op, ref, i < ref_lines.size() ? ref_lines[i] : "nothing more", r,
                i < lines.size() ? lines[i] : "nothing more");
  }
}

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) {
  NoGradGuard guard;
  for (Tensor& p : params_) {
    if (!p.grad().defined()) continue;
    if (set_to_none || p.grad().requires_grad())
      p.set_grad(set_to_none ? Tensor() : Tensor::zeros(p.shape(), p.dtype()));
    else
      p.grad().zero_();
  }
}

void ZeroRedundancyOptimizer::step() {
  XGRAD_CHECK(is_initialized(), "ZeroRedundancyOptimizer::step: MPI is not initialised");
  detail::quiesce();
  if (joining_) (void)join_round(true);
  step_impl(false);
}

void ZeroRedundancyOptimizer::step_impl(bool shadow) {
  const int n = world_size(), me = rank();
  ++steps_;
  consolidated_.reset();  // it would be stale
  for (const Flat& f : flats_)
    for (std::size_t i : f.params) {
      if (shadow) break;
      const Tensor g = params_[i].grad();
      XGRAD_CHECK(!g.defined() || (g.dtype() == f.dtype && g.numel() == params_[i].numel()),
                  "ZeroRedundancyOptimizer::step: parameter {} ({}, {}) has a gradient of shape {} and dtype {}", i,
                  shape_str(params_[i].shape()), f.dtype, shape_str(g.shape()), g.dtype());
    }
  const auto start = detail::Clock::now();
  const std::string what = fmt::format("ZeroRedundancyOptimizer::step (call {}{})", steps_,
                                       shadow ? ", shadowed by a rank that has joined" : "");
  detail::arrive_collective(what, start);
  // 1. the sums of this rank's share of the gradients, divided by the world size, into the pieces
  for (const Flat& f : flats_) {
    dispatch(f.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const std::size_t total = static_cast<std::size_t>(f.displs.back()) + static_cast<std::size_t>(f.counts.back());
      std::vector<T> packed(total), scratch;
      std::size_t off = 0;
      for (std::size_t i : f.params) {
        const auto m = static_cast<std::size_t>(params_[i].numel());
        const Tensor g = shadow ? Tensor() : params_[i].grad();  // a joined rank contributes zeros
        if (g.defined())
          std::memcpy(packed.data() + off, g.data<T>(), m * sizeof(T));
        else
          std::fill(packed.data() + off, packed.data() + off + m, T(0));
        off += m;
      }
      ring_reduce_scatter(packed.data(), f.counts, f.displs, me, n, scratch, fmt::format("{} ({})", what, f.dtype),
                          start);
      const T* mine = packed.data() + f.displs[static_cast<std::size_t>(me)];
      const T world = static_cast<T>(n);
      std::size_t at = 0;
      for (std::size_t k = 0; k < f.pieces.size(); ++k) {
        Tensor& piece = pieces_[f.first_piece + k];
        const auto m = static_cast<std::size_t>(f.pieces[k].len);
        Tensor g = piece.grad();
        const bool in_place = g.defined() && g.impl()->storage.use_count() == 1;
        if (!in_place) g = Tensor::empty(piece.shape(), f.dtype);
        T* dst = g.data<T>();
        for (std::size_t e = 0; e < m; ++e) dst[e] = mine[at + e] / world;  // as average_gradients
        if (in_place)
          ++g.impl()->storage->version;
        else
          piece.set_grad(g);
        at += m;
      }
    });
  }
  // 2. the local step, on the pieces refreshed from the parameters (which may have been written
  // since the last step: a model checkpoint loaded, an edit)
  for (const Flat& f : flats_)
    for (std::size_t k = 0; k < f.pieces.size(); ++k) {
      const Piece& pc = f.pieces[k];
      Tensor& piece = pieces_[f.first_piece + k];
      const std::size_t es = dtype_size(f.dtype);
      std::memcpy(piece.impl()->storage->data,
                  static_cast<const unsigned char*>(params_[pc.param].impl()->storage->data) +
                      static_cast<std::size_t>(pc.offset) * es,
                  static_cast<std::size_t>(pc.len) * es);
      ++piece.impl()->storage->version;
    }
  if (local_) local_->step();
  // 3. every share's new values into every rank's parameters
  for (const Flat& f : flats_) {
    dispatch(f.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const std::size_t total = static_cast<std::size_t>(f.displs.back()) + static_cast<std::size_t>(f.counts.back());
      std::vector<T> all(total);
      auto off = static_cast<std::size_t>(f.displs[static_cast<std::size_t>(me)]);
      for (std::size_t k = 0; k < f.pieces.size(); ++k) {
        const auto m = static_cast<std::size_t>(f.pieces[k].len);
        std::memcpy(all.data() + off, pieces_[f.first_piece + k].data<T>(), m * sizeof(T));
        off += m;
      }
      MPI_Request req;
      detail::mpi(MPI_Iallgatherv, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.data(), f.counts.data(), f.displs.data(),
                  detail::mpi_type(f.dtype), MPI_COMM_WORLD, &req);
      detail::wait_transfer(req, fmt::format("{}: MPI_Iallgatherv of the {} parameters", what, f.dtype), start);
      off = 0;
      for (std::size_t i : f.params) {
        const auto m = static_cast<std::size_t>(params_[i].numel());
        std::memcpy(params_[i].data<T>(), all.data() + off, m * sizeof(T));
        ++params_[i].impl()->storage->version;
        off += m;
      }
    });
  }
}

std::size_t ZeroRedundancyOptimizer::local_state_bytes() const {
  if (!local_) return 0;
  std::size_t bytes = 0;
  for (const auto& entry : local_->state_dict())
    if (entry.first.rfind("state.", 0) == 0) bytes += entry.second.nbytes();
  return bytes;
}

// Note [ZeRO checkpoints]: a rank's share of the state travels (consolidate_state_dict) and is stored
// (save_sharded) as "records" that say where each element belongs in the parameters, so that any
// partition can be rebuilt from them:
//   "group.<option>"                 the wrapped optimizer's option (its 'param_groups.0.<option>')
//   "scalar.<i>.<name>"              a per-parameter number of parameter i ('step'), 0-d
//   "seg.<i>.<offset>.<name>"        elements [offset, offset + len) of buffer <name> of parameter i,
//                                    1-d of len elements
// A full state (load_state_dict) reads as the records of whole parameters. assemble() cuts the
// records into any list of targets (whole parameters for the consolidated state, this rank's pieces
// for its own optimizer), checking that each target's buffer is covered exactly once and that every
// source agrees on the options and the per-parameter numbers. The only per-parameter scalar of
// nn::Optimizer::state_dict is 'step'; every other 'state.' entry is a buffer shaped like its parameter.
//
// Note [Join for ZeRO]: with a Join alive, step() first all-gathers which ranks still train (as
// DistributedDataParallel does, Note [Join] in data_parallel.cpp); a rank in Join::finish() answers
// that it does not and, while any rank trains, runs the whole step with zero gradients: it must,
// since the update of its share of the parameters is its own optimizer's. So the divisor stays the
// world size, every rank's parameters are equal after every step (the all-gather), and no final
// broadcast is needed.
namespace {

using Named = std::vector<std::pair<std::string, Tensor>>;

constexpr const char* kShardFormat = "xgrad.ZeroRedundancyOptimizer.shard";

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Reads an unsigned decimal at s[pos] up to the next '.', moving pos past the '.'.
bool read_index(const std::string& s, std::size_t& pos, std::int64_t& value) {
  const std::size_t dot = s.find('.', pos);
  if (dot == std::string::npos || dot == pos) return false;
  auto [ptr, ec] = std::from_chars(s.data() + pos, s.data() + dot, value);
  if (ec != std::errc() || ptr != s.data() + dot || value < 0) return false;
  pos = dot + 1;
  return true;
}

std::string describe(const Tensor& p) { return fmt::format("{}{}", p.dtype(), shape_str(p.shape())); }

std::string describe(const std::vector<Tensor>& params) {
  std::string out;
  for (std::size_t i = 0; i < params.size(); ++i) out += (i ? "; " : "") + describe(params[i]);
  return out;
}

Tensor flat_copy(const Tensor& t, std::int64_t offset, std::int64_t len) {
  Tensor c = t.clone_data();
  Tensor out = Tensor::empty({len}, t.dtype());
  std::memcpy(out.impl()->storage->data,
              static_cast<const unsigned char*>(c.impl()->storage->data) +
                  static_cast<std::size_t>(offset) * dtype_size(t.dtype()),
              static_cast<std::size_t>(len) * dtype_size(t.dtype()));
  return out;
}

// The records of any number of sources, checked against the parameters (Note [ZeRO checkpoints]).
struct Records {
  struct Seg {
    std::size_t param;
    std::int64_t offset;
    std::string name;
    Tensor data;  // 1-d
  };
  const std::vector<Tensor>* params;
  std::string who;
  Named options;
  std::string options_source;
  std::vector<Seg> segs;
  std::map<std::pair<std::size_t, std::string>, std::pair<double, std::string>> scalars;  // value, source
  std::vector<std::vector<std::string>> names;  // per parameter: buffer names, in order of first appearance

  Records(const std::vector<Tensor>& p, std::string w) : params(&p), who(std::move(w)), names(p.size()) {}

  void check_param(std::size_t i, const std::string& key, const std::string& source) const {
    XGRAD_CHECK(i < params->size(), "{}: entry '{}' of {} names parameter {}, but the optimizer has {} parameters", who,
                key, source, i, params->size());
  }
  void add_seg(std::size_t i, std::int64_t offset, const std::string& name, Tensor data, const std::string& key,
               const std::string& source) {
    check_param(i, key, source);
    const Tensor& p = (*params)[i];
    XGRAD_CHECK(data.dim() == 1 && data.dtype() == p.dtype() && offset + data.numel() <= p.numel(),
                "{}: entry '{}' of {} ({}) does not fit parameter {} ({})", who, key, source, describe(data), i,
                describe(p));
    auto& n = names[i];
    if (std::find(n.begin(), n.end(), name) == n.end()) n.push_back(name);
    segs.push_back({i, offset, name, std::move(data)});
  }
  void add_scalar(std::size_t i, const std::string& name, const Tensor& value, const std::string& key,
                  const std::string& source) {
    check_param(i, key, source);
    XGRAD_CHECK(value.numel() == 1, "{}: entry '{}' of {} must have one element, got shape {}", who, key, source,
                shape_str(value.shape()));
    const double v = value.item();
    auto [it, fresh] = scalars.emplace(std::make_pair(i, name), std::make_pair(v, source));
    XGRAD_CHECK(fresh || it->second.first == v, "{}: '{}' of parameter {} is {} in {} but {} in {}", who, name, i,
                it->second.first, it->second.second, v, source);
  }
  void add_options(const Named& opts, const std::string& source) {
    if (opts.empty()) return;
    if (options_source.empty()) {
      options = opts;
      options_source = source;
      return;
    }
    XGRAD_CHECK(opts.size() == options.size(), "{}: {} holds {} optimizer options, but {} holds {}", who, source,
                opts.size(), options_source, options.size());
    for (std::size_t k = 0; k < opts.size(); ++k) {
      XGRAD_CHECK(opts[k].first == options[k].first, "{}: option {} is '{}' in {} but '{}' in {}", who, k,
                  options[k].first, options_source, opts[k].first, source);
      XGRAD_CHECK(opts[k].second.item() == options[k].second.item(), "{}: option '{}' is {} in {} but {} in {}", who,
                  opts[k].first, options[k].second.item(), options_source, opts[k].second.item(), source);
    }
  }
  // Records as written by share_records (a message or a shard file).
  void add_records(const Named& recs, const std::string& source) {
    Named opts;
    for (const auto& [key, t] : recs) {
      std::size_t pos = 0;
      std::int64_t i = 0, offset = 0;
      if (starts_with(key, "group.")) {
        XGRAD_CHECK(t.numel() == 1, "{}: entry '{}' of {} must have one element", who, key, source);
        opts.emplace_back(key.substr(6), t);
      } else if (starts_with(key, "scalar.")) {
        pos = 7;
        XGRAD_CHECK(read_index(key, pos, i) && pos < key.size(), "{}: malformed entry '{}' in {}", who, key, source);
        add_scalar(static_cast<std::size_t>(i), key.substr(pos), t, key, source);
      } else if (starts_with(key, "seg.")) {
        pos = 4;
        XGRAD_CHECK(read_index(key, pos, i) && read_index(key, pos, offset) && pos < key.size(),
                    "{}: malformed entry '{}' in {}", who, key, source);
        add_seg(static_cast<std::size_t>(i), offset, key.substr(pos), t, key, source);
      } else {
        XGRAD_CHECK(false, "{}: unknown entry '{}' in {} (a ZeRO share holds 'group.', 'scalar.' and 'seg.' entries)",
                    who, key, source);
      }
    }
    add_options(opts, source);
  }
};

}  // namespace

std::vector<ZeroRedundancyOptimizer::Target> ZeroRedundancyOptimizer::local_targets() const {
  std::vector<Target> out;
  for (const Flat& f : flats_)
    for (const Piece& pc : f.pieces) out.push_back({pc.param, pc.offset, pc.len});
  return out;
}

namespace {
// The state of `targets` in nn::Optimizer::state_dict's form, one group, target k as parameter k
// (Note [ZeRO checkpoints]); buffers shaped like their parameter when `param_shape`, else 1-d.
template <class Target>
Named assemble(const Records& in, const std::vector<Target>& targets, bool param_shape) {
  const auto& params = *in.params;
  Named out;
  out.emplace_back("param_groups.0.num_params", Tensor::scalar(static_cast<double>(targets.size()), kFloat64));
  for (const auto& [name, t] : in.options) out.emplace_back("param_groups.0." + name, t);
  std::map<std::size_t, std::vector<const Records::Seg*>> by_param;
  for (const auto& seg : in.segs) by_param[seg.param].push_back(&seg);
  for (std::size_t k = 0; k < targets.size(); ++k) {
    const Target& t = targets[k];
    const Tensor& p = params[t.param];
    const std::size_t es = dtype_size(p.dtype());
    const std::string prefix = fmt::format("state.0.{}.", k);
    for (auto it = in.scalars.lower_bound({t.param, ""}); it != in.scalars.end() && it->first.first == t.param; ++it)
      out.emplace_back(prefix + it->first.second, Tensor::scalar(it->second.first, kFloat64));
    for (const std::string& name : in.names[t.param]) {
      Tensor buf = param_shape ? Tensor::empty(p.shape(), p.dtype()) : Tensor::empty({t.len}, p.dtype());
      auto* dst = static_cast<unsigned char*>(buf.impl()->storage->data);
      std::int64_t covered = 0;
      for (const Records::Seg* seg : by_param[t.param]) {
        if (seg->name != name) continue;
        const std::int64_t lo = std::max(t.offset, seg->offset);
        const std::int64_t hi = std::min(t.offset + t.len, seg->offset + seg->data.numel());
        if (lo >= hi) continue;
        std::memcpy(dst + static_cast<std::size_t>(lo - t.offset) * es,
                    static_cast<const unsigned char*>(seg->data.impl()->storage->data) +
                        static_cast<std::size_t>(lo - seg->offset) * es,
                    static_cast<std::size_t>(hi - lo) * es);
        covered += hi - lo;
      }
      XGRAD_CHECK(covered == t.len,
                  "{}: the saved '{}' of parameter {} ({}) covers {} elements of [{}, {}), which needs {} (a partial "
                  "state, or shares that overlap)",
                  in.who, name, t.param, describe(p), covered, t.offset, t.offset + t.len, t.len);
      out.emplace_back(prefix + name, buf);
    }
  }
  return out;
}

std::string shard_path(const std::string& dir, int r) {
  return (std::filesystem::path(dir) / fmt::format("zero-shard-{}.safetensors", r)).string();
}

// Every rank learns whether any rank failed; returns the lowest failing rank, or -1.
int first_failure(bool failed, const std::string& what) {
  const int n = detail::world_size_raw();
  int mine = failed ? detail::rank_raw() : n, lowest = n;
  MPI_Request req;
  detail::mpi(MPI_Iallreduce, &mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
  detail::wait_collective(req, what + ": MPI_Iallreduce of the ranks that failed");
  return lowest < n ? lowest : -1;
}

[[noreturn]] void rethrow_agreed(const std::string& own, int failed_rank, const char* who) {
  if (!own.empty()) throw Error(own);
  throw Error(
      fmt::format("{}: rank {} failed (its exception has the reason); nothing changed on this rank", who, failed_rank));
}
}  // namespace

Named ZeroRedundancyOptimizer::share_records(const char* who) const {
  Named out;
  if (!local_) return out;
  XGRAD_CHECK(local_->param_groups().size() == 1,
              "{}: the wrapped {} has {} parameter groups; ZeRO's checkpoints support the one group the factory "
              "makes",
              who, local_->name(), local_->param_groups().size());
  const std::vector<Target> pieces = local_targets();
  for (auto& [key, t] : local_->state_dict()) {
    if (starts_with(key, "param_groups.0.")) {
      if (key != "param_groups.0.num_params") out.emplace_back("group." + key.substr(15), t);
      continue;
    }
    std::size_t pos = 6;
    std::int64_t g = 0, k = 0;
    XGRAD_CHECK(starts_with(key, "state.") && read_index(key, pos, g) && g == 0 && read_index(key, pos, k) &&
                    static_cast<std::size_t>(k) < pieces.size(),
                "{}: unexpected entry '{}' in the wrapped {}'s state_dict", who, key, local_->name());
    const Target& pc = pieces[static_cast<std::size_t>(k)];
    const std::string name = key.substr(pos);
    if (name == "step")
      out.emplace_back(fmt::format("scalar.{}.{}", pc.param, name), t);
    else
      out.emplace_back(fmt::format("seg.{}.{}.{}", pc.param, pc.offset, name), t);
  }
  return out;
}

void ZeroRedundancyOptimizer::load_local(const Named& local, const char* who) {
  if (!local_) return;
  try {
    local_->load_state_dict(local);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: this rank's share (its pieces numbered as parameters): {}", who, e.what()));
  }
}

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  constexpr const char* who = "ZeroRedundancyOptimizer::consolidate_state_dict";
  detail::require_mpi(who);
  const int n = world_size(), me = rank();
  XGRAD_CHECK(to >= 0 && to < n, "{}: argument 'to' ({}) is not a rank of a world of size {}", who, to, n);
  consolidated_.reset();
  const std::string bytes = nn::to_safetensors_bytes(share_records(who));
  XGRAD_CHECK(bytes.size() <= INT_MAX, "{}: this rank's share takes {} bytes, beyond MPI's int counts", who,
              bytes.size());
  const auto start = detail::Clock::now();
  const std::string what = fmt::format("{} (call {})", who, ++consolidations_);
  detail::arrive_collective(what, start);
  const int len = static_cast<int>(bytes.size());
  std::vector<int> lens(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  MPI_Request req;
  detail::mpi(MPI_Iallgather, &len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &req);
  detail::wait_transfer(req, what + ": MPI_Iallgather of the shares' sizes", start);
  std::int64_t total = 0;
  for (int r = 0; r < n; ++r) {
    displs[static_cast<std::size_t>(r)] = static_cast<int>(std::min<std::int64_t>(total, INT_MAX));
    total += lens[static_cast<std::size_t>(r)];
  }
  XGRAD_CHECK(total <= INT_MAX, "{}: the shares take {} bytes together, beyond MPI's int counts", who, total);
  std::string all(me == to ? static_cast<std::size_t>(total) : 0, '\0');
  detail::mpi(MPI_Igatherv, bytes.data(), len, MPI_BYTE, all.data(), lens.data(), displs.data(), MPI_BYTE, to,
              MPI_COMM_WORLD, &req);
  detail::wait_transfer(req, what + ": MPI_Igatherv of the shares", start);
  if (me != to) return;
  Records recs(params_, who);
  for (int r = 0; r < n; ++r) {
    const std::string source = fmt::format("rank {}'s share", r);
    const auto file =
        nn::parse_safetensors(reinterpret_cast<const std::uint8_t*>(all.data()) + displs[static_cast<std::size_t>(r)],
                              static_cast<std::size_t>(lens[static_cast<std::size_t>(r)]), source);
    recs.add_records(file.tensors, source);
  }
  std::vector<Target> whole;
  for (std::size_t i = 0; i < params_.size(); ++i) whole.push_back({i, 0, params_[i].numel()});
  consolidated_ = assemble(recs, whole, true);
}

Named ZeroRedundancyOptimizer::state_dict() const {
  XGRAD_CHECK(consolidated_.has_value(),
              "ZeroRedundancyOptimizer::state_dict: rank {} holds no consolidated state; call "
              "consolidate_state_dict({}) on every rank first (step() and the loads discard an earlier one)",
              is_initialized() ? rank() : 0, is_initialized() ? rank() : 0);
  Named out;
  for (const auto& [name, t] : *consolidated_) out.emplace_back(name, t.clone_data());
  return out;
}

void ZeroRedundancyOptimizer::load_state_dict(const Named& full) {
  constexpr const char* who = "ZeroRedundancyOptimizer::load_state_dict";
  Records recs(params_, who);
  Named opts;
  std::set<std::string> seen;
  bool has_count = false;
  for (const auto& [key, t] : full) {
    XGRAD_CHECK(seen.insert(key).second, "{}: entry '{}' appears twice", who, key);
    XGRAD_CHECK(t.defined(), "{}: entry '{}' is an undefined tensor", who, key);
    std::size_t pos = 0;
    std::int64_t g = 0, i = 0;
    if (starts_with(key, "param_groups.")) {
      pos = 13;
      XGRAD_CHECK(read_index(key, pos, g) && pos < key.size(), "{}: malformed entry name '{}'", who, key);
      XGRAD_CHECK(g == 0, "{}: entry '{}' names parameter group {}; a ZeRO state has the one group 0", who, key, g);
      XGRAD_CHECK(t.numel() == 1, "{}: entry '{}' must have one element, got shape {}", who, key, shape_str(t.shape()));
      const std::string opt = key.substr(pos);
      if (opt == "num_params") {
        XGRAD_CHECK(t.item() == static_cast<double>(params_.size()),
                    "{}: the state was saved for {} parameters, but this optimizer has {}", who, t.item(),
                    params_.size());
        has_count = true;
      } else {
        opts.emplace_back(opt, t);
      }
    } else if (starts_with(key, "state.")) {
      pos = 6;
      XGRAD_CHECK(read_index(key, pos, g) && read_index(key, pos, i) && pos < key.size(),
                  "{}: malformed entry name '{}'", who, key);
      XGRAD_CHECK(g == 0, "{}: entry '{}' names parameter group {}; a ZeRO state has the one group 0", who, key, g);
      const std::string name = key.substr(pos);
      recs.check_param(static_cast<std::size_t>(i), key, "the state");
      const Tensor& p = params_[static_cast<std::size_t>(i)];
      if (name == "step") {
        recs.add_scalar(static_cast<std::size_t>(i), name, t, key, "the state");
      } else {
        XGRAD_CHECK(t.shape() == p.shape() && t.dtype() == p.dtype(), "{}: entry '{}' is {}, but parameter {} is {}",
                    who, key, describe(t), i, describe(p));
        recs.add_seg(static_cast<std::size_t>(i), 0, name, flat_copy(t, 0, t.numel()), key, "the state");
      }
    } else {
      XGRAD_CHECK(false, "{}: unknown entry '{}' (names start with 'param_groups.0.' or 'state.0.')", who, key);
    }
  }
  XGRAD_CHECK(has_count, "{}: missing entry 'param_groups.0.num_params'", who);
  recs.add_options(opts, "the state");
  load_local(assemble(recs, local_targets(), false), who);
  consolidated_.reset();
}

std::vector<std::pair<std::int64_t, std::int64_t>> ZeroRedundancyOptimizer::old_shares(Dtype d, int world) const {
  std::int64_t total = 0;
  for (const Tensor& p : params_)
    if (p.dtype() == d) total += p.numel();
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (int r = 0; r < world; ++r) out.emplace_back(total * r / world, total * (r + 1) / world);
  return out;
}

void ZeroRedundancyOptimizer::save_sharded(const std::string& dir) {
  constexpr const char* who = "ZeroRedundancyOptimizer::save_sharded";
  detail::require_mpi(who);
  const int n = world_size(), me = rank();
  const std::string what = fmt::format("{} (to '{}')", who, dir);
  // one identifier for the files of this save, so that load_sharded can tell them from older ones
  std::uint64_t id = 0;
  if (me == 0) {
    std::random_device rd;
    id = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }
  MPI_Request req;
  detail::mpi(MPI_Ibcast, &id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req);
  detail::wait_collective(req, what + ": MPI_Ibcast of the save's identifier");
  std::string error;
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);  // a failure shows in the write, which names the path
    std::map<std::string, std::string> meta{{"format", kShardFormat},
                                            {"version", "1"},
                                            {"world_size", std::to_string(n)},
                                            {"rank", std::to_string(me)},
                                            {"save_id", fmt::format("{:016x}", id)},
                                            {"parameters", describe(params_)},
                                            {"optimizer", local_ ? local_->name() : ""}};
    nn::save_state(shard_path(dir, me), share_records(who), meta);
  } catch (const std::exception& e) {
    error = fmt::format("{}: {}", who, e.what());
  }
  const int failed = first_failure(!error.empty(), what);
  if (failed >= 0) rethrow_agreed(error, failed, who);
}

void ZeroRedundancyOptimizer::load_sharded(const std::string& dir) {
  constexpr const char* who = "ZeroRedundancyOptimizer::load_sharded";
  detail::require_mpi(who);
  const std::string what = fmt::format("{} (from '{}')", who, dir);
  std::string error;
  Named backup;
  bool changed = false;
  try {
    const std::string path0 = shard_path(dir, 0);
    std::map<int, nn::SafetensorsFile> files;
    auto meta = [&](const nn::SafetensorsFile& f, const std::string& path, const char* key) {
      XGRAD_CHECK(f.metadata.contains(key), "{}: file '{}' lacks the metadata '{}' of a ZeRO shard", who, path, key);
      return f.metadata.at(key);
    };
    files.emplace(0, nn::load_safetensors(path0));
    const nn::SafetensorsFile& f0 = files.at(0);
    XGRAD_CHECK(f0.metadata.contains("format") && meta(f0, path0, "format") == kShardFormat,
                "{}: file '{}' is not a ZeroRedundancyOptimizer shard (its metadata lacks format={})", who, path0,
                kShardFormat);
    const std::string world_text = meta(f0, path0, "world_size"), id = meta(f0, path0, "save_id");
    const int world = std::atoi(world_text.c_str());
    XGRAD_CHECK(world >= 1 && std::to_string(world) == world_text, "{}: file '{}' has world_size '{}'", who, path0,
                world_text);
    // the old ranks whose shares overlap this rank's new ones
    std::set<int> needed;
    const int me = rank();
    for (const Flat& f : flats_) {
      const std::int64_t lo = f.displs[static_cast<std::size_t>(me)], hi = lo + f.counts[static_cast<std::size_t>(me)];
      const auto shares = old_shares(f.dtype, world);
      for (int r = 0; r < world; ++r)
        if (std::max(lo, shares[static_cast<std::size_t>(r)].first) <
            std::min(hi, shares[static_cast<std::size_t>(r)].second))
          needed.insert(r);
    }
    Records recs(params_, who);
    const std::string ours = describe(params_);
    for (int r : needed) {
      const std::string path = shard_path(dir, r);
      if (!files.count(r)) files.emplace(r, nn::load_safetensors(path));
      const nn::SafetensorsFile& f = files.at(r);
      XGRAD_CHECK(f.metadata.contains("format") && meta(f, path, "format") == kShardFormat,
                  "{}: file '{}' is not a ZeroRedundancyOptimizer shard (its metadata lacks format={})", who, path,
                  kShardFormat);
      XGRAD_CHECK(meta(f, path, "version") == "1", "{}: file '{}' has shard format version '{}', this build reads 1",
                  who, path, meta(f, path, "version"));
      XGRAD_CHECK(meta(f, path, "save_id") == id && meta(f, path, "world_size") == world_text,
                  "{}: file '{}' belongs to another save (save_id {}, world_size {}) than '{}' (save_id {}, world_size "
                  "{})",
                  who, path, meta(f, path, "save_id"), meta(f, path, "world_size"), path0, id, world_text);
      XGRAD_CHECK(meta(f, path, "rank") == std::to_string(r), "{}: file '{}' was written by rank {}, not {}", who, path,
                  meta(f, path, "rank"), r);
      const std::string theirs = meta(f, path, "parameters");
      if (theirs != ours) {
        std::vector<std::string> a, b;
        for (const auto* v : {&theirs, &ours}) {
          auto& out = v == &theirs ? a : b;
          std::size_t at = 0;
          while (at <= v->size()) {
            const std::size_t semi = v->find("; ", at);
            out.push_back(v->substr(at, semi == std::string::npos ? std::string::npos : semi - at));
            if (semi == std::string::npos) break;
            at = semi + 2;
          }
        }
        std::size_t i = 0;
        while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
        XGRAD_CHECK(false,
                    "{}: file '{}' was saved for other parameters than this optimizer's; the first difference is "
                    "parameter {}: {} in the file, {} here ({} parameters in the file, {} here)",
                    who, path, i, i < a.size() ? a[i] : "none", i < b.size() ? b[i] : "none", a.size(), b.size());
      }
      const std::string kind = meta(f, path, "optimizer");
      XGRAD_CHECK(kind.empty() || !local_ || kind == local_->name(),
                  "{}: file '{}' holds the state of {}, but this optimizer wraps {}", who, path, kind, local_->name());
      recs.add_records(f.tensors, fmt::format("file '{}'", path));
    }
    Named local = assemble(recs, local_targets(), false);
    if (local_) {
      backup = local_->state_dict();
      load_local(local, who);
      changed = true;
    }
  } catch (const std::exception& e) {
    error = starts_with(e.what(), who) ? std::string(e.what()) : fmt::format("{}: {}", who, e.what());
  }
  const int failed = first_failure(!error.empty(), what);
  if (failed >= 0) {
    if (changed) local_->load_state_dict(backup);
    rethrow_agreed(error, failed, who);
  }
  consolidated_.reset();
}

// ---- uneven inputs (Note [Join for ZeRO]) ----

int ZeroRedundancyOptimizer::join_round(bool active) {
  const int n = detail::world_size_raw();
  const int flag = active ? 1 : 0;
  std::vector<int> flags(static_cast<std::size_t>(n), 0);
  MPI_Request req;
  detail::mpi(MPI_Iallgather, &flag, 1, MPI_INT, flags.data(), 1, MPI_INT, MPI_COMM_WORLD, &req);
  detail::wait_collective(
      req, fmt::format("ZeroRedundancyOptimizer::step (call {}): Join's MPI_Iallgather of the ranks still training",
                       steps_ + 1));
  for (int f : flags)
    if (f != 0) return 1;
  return 0;
}

void ZeroRedundancyOptimizer::join_finish() {
  detail::require_mpi("Join::finish");
  while (join_round(false) != 0) step_impl(true);
}

Join::Join(ZeroRedundancyOptimizer& zero) : zero_(&zero), uncaught_at_start_(std::uncaught_exceptions()) {
  XGRAD_CHECK(!zero_->joining_, "Join: this ZeroRedundancyOptimizer already has a Join");
  zero_->joining_ = true;
}

}  // namespace xgrad::distributed
