#pragma once
// The tape and the backward engine, and the public API for adding differentiable ops.
//
// Note [The tape]: every op run in grad mode with an input that requires grad becomes a Node that
// records the edges to its inputs' producers (or to the leaf tensors themselves) and a sequence
// number taken from one global counter, so creation order is a topological order. backward()
// collects the reachable nodes with an explicit stack and runs them in decreasing sequence number,
// summing gradients per input in that fixed order (deterministic whatever the thread count).
// Nodes are owned by the tensors that were produced by them: a graph dies with its outputs.
//
// Note [Saved tensors]: Function::save_for_backward records the storage version, and backward
// refuses a tensor modified in place after it was saved. A tensor that may still become this op's
// own output (no grad_fn and not requiring grad, e.g. the fresh result) is saved as an alias with no
// history (same storage, no grad_fn), so saving an op's output makes no reference cycle. Any other
// tensor (a leaf that requires grad, or an earlier op's output) is saved as is: it can never be
// given this op's history (set_history detaches such outputs first), and skipping the alias saves
// two heap allocations per saved input. When a saved alias turns out to be one of the op's own
// outputs (checked once, when the outputs get their history: same storage, shape and dtype), the
// node remembers which output it is; saved() in a create_graph backward then returns it WITH its
// history (grad_fn = this node, taken from the engine's reference to the running node), as
// PyTorch's SavedVariable keeps a weak reference to its grad_fn. No cycle: the node never owns it.
//
// Note [Create graph]: backward(..., create_graph=true) and grad(..., create_graph=true) run every
// node's backward in grad mode, so a backward written with differentiable ops records its own
// graph and the gradients it returns carry history (higher-order derivatives, to any order).
// Gradients flowing into one tensor are summed with a recorded add when either carries history,
// and a leaf's .grad becomes the (recorded) sum, as torch's AccumulateGrad does. retain_graph
// defaults to create_graph. A Function declares that its backward is differentiable with
//   static constexpr bool kDifferentiableBackward = true;
// the default is false, and the engine refuses create_graph through any node whose op has not
// declared it, with an xgrad::Error naming the op: a backward that writes its result with a raw
// kernel returns a tensor without history, and its second derivative would be silently wrong.
// A backward keeps its fast kernel for first order and stays differentiable by calling a backward
// op: a Function through apply, or a kernel and formula pair through apply_fused, which runs the
// formula's recorded ops only when the result will be differentiated (Note [Fused ops] in
// core/fused.hpp). docs/concepts.md lists the ops that support it.
//
// Note [Leaf accumulation]: within one backward the engine sums every contribution to a leaf (in the
// fixed order of Note [The tape]) and adds that one sum into the leaf's .grad when the last node
// with an edge to the leaf has run. The add holds the leaf's lock (a striped table of mutexes keyed
// by the TensorImpl address, shared with Tensor::grad/set_grad/zero_grad), so backwards running
// concurrently on several threads into shared leaves each add their sum atomically, in whichever
// order they get there. The sum is written into the engine's own buffer (grad + sum, commutative,
// so the same bits as sum + grad), never into the buffer .grad held before: a Tensor returned by an
// earlier grad() keeps its values. The one exception is a .grad its owner marked with
// detail::set_accumulate_in_place (outside create_graph): the sum is added into that buffer, under
// the lock, with the same bits. Two backwards into an undefined .grad therefore give bit-exact
// a + b whatever their order; three or more give a sum whose rounding depends on the order. See
// "Threads" in docs/concepts.md for the whole contract.
//
// Note [Hooks]: Tensor::register_hook follows torch's tensor hooks. A non-leaf's hooks live on its
// grad_fn, one list per output (Node::output_hooks_, as torch keeps them as the node's tensor
// pre-hooks), so they fire even after the tensor's last handle is gone; a leaf's live on its
// TensorImpl (TensorImpl::hooks), as torch keeps them on the leaf's AccumulateGrad. The engine runs
// a non-leaf's hooks on the node's summed output gradient just before the node runs (after an
// output no gradient reached was given zeros, so a hook always sees a defined tensor), before
// retain_grad stores it and grad() captures it: grad() returns the hooked gradient of a requested
// non-leaf (torch 2 returns the unhooked one when that node also leads to another requested
// input). A node that a pruned grad() does not run runs no hooks, unless one of its outputs is a
// requested input. A leaf's hooks run on this backward's sum for it in flush (Note [Leaf
// accumulation]), before the add into .grad, and its post-accumulate-grad hooks right after the
// add, outside the leaf's lock (a hook may call grad()): that is the moment the last node with an
// edge to the leaf has run, which is what a data-parallel wrapper needs to start reducing a
// gradient while the backward goes on. In grad(), a requested leaf's hooks run once on its
// captured sum, after the engine (as torch 2 runs them there; torch 1.13 did not). Hooks run on
// the thread running the engine, which is the thread that called backward/grad (the engine is
// serial; kernels inside a node use TBB), in grad mode iff create_graph. A removed hook leaves an
// empty function in its slot, so indices stay valid; the engine copies each hook before calling
// it, so a hook may register or remove hooks on the same tensor. Registration writes the lists
// without a lock: it must not race with a backward that reaches the tensor (as retain_grad). With
// no hook registered the engine's cost is an empty-vector test per node and a null test per leaf.
// The node (or leaf) owns its hooks, so a hook holding its own tensor by value is a reference
// cycle (C++ has no collector to break it, unlike torch's Python closures).
//
// Note [Pruned grad]: xgrad::grad() runs only the nodes from which a requested input is reachable,
// and while a node runs, needs_input_grad(i) is false for an input that leads to no requested one
// (the node's backward may skip that gradient, e.g. a weight-gradient GEMM); a gradient returned
// for it anyway is dropped. backward() needs no pruning: every edge leads to a leaf that requires
// grad.
#include <array>
#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "xgrad/core/small_object_allocator.hpp"
#include "xgrad/core/std_function.hpp"
#include "xgrad/core/tensor.hpp"

namespace xgrad {

// ---- grad mode (thread-local) ----------------------------------------------------------------
struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

/// Disables graph recording in this thread for the guard's lifetime (like torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// Sets grad mode to `enabled` in this thread for the guard's lifetime (like torch::AutoGradMode):
/// what an optimizer's closure or a Jacobian evaluation needs whatever the caller's mode.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

// ---- graph ------------------------------------------------------------------------------------
/// Where the gradient of one input goes: the producing node's output `input_nr`, or a leaf.
struct Edge {
  std::shared_ptr<Node> fn;
  std::shared_ptr<TensorImpl> leaf;
  std::uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr || leaf != nullptr; }
};

namespace detail {
/// The hooks registered on one tensor (Note [Hooks]): index i is the i-th registration, an empty
/// function a removed hook. post_accumulate is used on leaves only.
struct TensorHooks {
  std::vector<std::function<Tensor(const Tensor&)>> pre;
  std::vector<std::function<void(Tensor&)>> post_accumulate;
};
}  // namespace detail

struct TensorMeta {
  Shape shape;
  Dtype dtype = kFloat32;
};

namespace detail {
struct InputMaskScope;
}

class Node {
 public:
  Node() = default;
  Node(Node&&) = default;
  Node& operator=(Node&&) = default;
  virtual ~Node();

  /// Op name used in error messages and printing.
  virtual const char* name() const = 0;
  /// Given one gradient per output (the engine fills missing ones with zeros), returns one
  /// gradient per input; entries for inputs that need no gradient may be undefined.
  virtual Tensors apply(Tensors&& grad_outputs) = 0;
  /// Frees saved tensors after a backward without retain_graph.
  virtual void release_saved() { released_ = true; }
  /// True when this op's backward is written with differentiable ops, so that it can run under
  /// create_graph (Note [Create graph]). False unless the op declares kDifferentiableBackward.
  virtual bool supports_create_graph() const { return false; }
  /// Called once the outputs have their history: lets saved aliases of outputs find their output
  /// number (Note [Saved tensors]).
  virtual void bind_saved_outputs(std::span<const Tensor> /*outputs*/) {}

  /// True when input i needs a gradient: it requires grad and, during a grad() run, leads to a
  /// requested input (Note [Pruned grad]).
  bool needs_input_grad(std::size_t i) const {
    return i < next_edges_.size() && next_edges_[i].valid() && (input_mask_ == nullptr || input_mask_[i] != 0);
  }
  std::size_t num_inputs() const { return next_edges_.size(); }
  std::uint64_t sequence_nr() const { return sequence_nr_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  const std::vector<TensorMeta>& input_meta() const { return input_meta_; }
  const std::vector<TensorMeta>& output_meta() const { return output_meta_; }
  const std::vector<std::weak_ptr<TensorImpl>>& retained_outputs_for_engine() const;
  /// The register_hook hooks of each output (Note [Hooks]): empty when none was ever registered,
  /// else one (possibly empty) list per output.
  const std::vector<std::vector<std::function<Tensor(const Tensor&)>>>& output_hooks_for_engine() const {
    return output_hooks_;
  }

 protected:
  bool released_ = false;

 private:
  friend struct GraphBuilder;
  friend class Tensor;
  friend void run_backward(const Tensors&, const Tensors&, std::optional<bool>, bool);
  friend struct detail::InputMaskScope;
  std::uint64_t sequence_nr_ = 0;
  const std::uint8_t* input_mask_ = nullptr;  // set by the engine while a pruned grad() runs this node
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> input_meta_;
  std::vector<TensorMeta> output_meta_;
  std::vector<std::weak_ptr<TensorImpl>> retained_outputs_;                      // outputs that called retain_grad()
  std::vector<std::vector<std::function<Tensor(const Tensor&)>>> output_hooks_;  // Note [Hooks]
};

/// Runs backward from several roots at once with their seed gradients (undefined = ones for
/// one-element roots). This is what Tensor::backward calls. create_graph records the backward
/// (Note [Create graph]); retain_graph defaults to create_graph.
void run_backward(const Tensors& roots, const Tensors& grad_roots, std::optional<bool> retain_graph = std::nullopt,
                  bool create_graph = false);

/// Computes and returns d(outputs)/d(inputs) without touching .grad (like torch::autograd::grad).
/// Inputs that the outputs do not depend on get an undefined tensor unless allow_unused is false,
/// in which case that is an error. With create_graph the returned gradients carry history and can
/// be differentiated again (Note [Create graph]); grad_outputs may then require grad themselves.
/// retain_graph defaults to create_graph. The parameters are torch::autograd::grad's, in its order
/// (create_graph before allow_unused; before issue 34 xgrad had them the other way round).
Tensors grad(const Tensors& outputs, const Tensors& inputs, const Tensors& grad_outputs = {},
             std::optional<bool> retain_graph = std::nullopt, bool create_graph = false, bool allow_unused = false);

// ---- the extension API --------------------------------------------------------------------------
/// Base of every differentiable op. A Function is a Node with typed state: write
///
///   struct Scale : Function<Scale> {
///     static constexpr const char* kName = "scale";
///     double k = 0;                                   // state for backward
///     Tensor forward(const Tensor& x, double k_) {   // runs in no-grad mode
///       k = k_; return mul(x, k_);
///     }
///     Tensors backward(const Tensors& grads) {       // one per output -> one per tensor input
///       return {mul(grads[0], k)};
///     }
///   };
///   Tensor scale(const Tensor& x, double k) { return apply<Scale>(x, k); }
///
/// Tensor inputs are the Tensor and std::vector<Tensor> arguments of forward, in order; backward
/// returns one gradient per tensor input (undefined where !needs_input_grad(i)). forward may
/// return a Tensor or a Tensors (several outputs).
template <class Derived>
class Function : public Node {
 public:
  const char* name() const override { return Derived::kName; }

  /// Saves tensors for backward (aliases without history; see Note [Saved tensors]).
  void save_for_backward(std::initializer_list<Tensor> ts) {
    reserve_saved(ts.size());
    for (const auto& t : ts) save_one(t);
  }
  void save_for_backward(const Tensors& ts) {
    reserve_saved(ts.size());
    for (const auto& t : ts) save_one(t);
  }
  /// The saved tensors, in save order; throws if they were freed or modified in place since.
  Tensors saved() const;
  /// Shortcut for saved()[i] with the same checks.
  Tensor saved(std::size_t i) const;

  void release_saved() override {
    saved_.clear();
    saved_versions_.clear();
    saved_output_nr_.clear();
    released_ = true;
  }

  bool supports_create_graph() const override {
    if constexpr (requires { Derived::kDifferentiableBackward; })
      return Derived::kDifferentiableBackward;
    else
      return false;
  }
  void bind_saved_outputs(std::span<const Tensor> outputs) override;

  Tensors apply(Tensors&& grad_outputs) final { return static_cast<Derived*>(this)->backward(grad_outputs); }

 private:
  void save_one(const Tensor& t);
  void reserve_saved(std::size_t more) {
    saved_.reserve(saved_.size() + more);
    saved_versions_.reserve(saved_versions_.size() + more);
  }
  Tensor unpack(std::size_t i) const;
  std::vector<Tensor> saved_;
  std::vector<std::uint32_t> saved_versions_;
  // saved_output_nr_[i] = 1 + output number when saved tensor i is an alias of that output, else 0
  // (empty when no saved tensor is an output: the usual case, no allocation).
  std::vector<std::uint32_t> saved_output_nr_;
};

namespace detail {
void check_saved(const Node& node, bool released, const std::vector<Tensor>& saved,
                 const std::vector<std::uint32_t>& versions, std::size_t index);
/// The tensor inputs of one apply() call: inline storage for the usual few, heap beyond that.
class InputList {
 public:
  InputList() = default;
  InputList(const InputList&) = delete;
  InputList& operator=(const InputList&) = delete;
  void push_back(const Tensor* t) {
    if (heap_.empty() && n_ < kInline) {
      inline_[n_++] = t;
      return;
    }
    if (heap_.empty()) heap_.assign(inline_.begin(), inline_.begin() + static_cast<std::ptrdiff_t>(n_));
    heap_.push_back(t);
    ++n_;
  }
  std::span<const Tensor* const> span() const {
    return heap_.empty() ? std::span<const Tensor* const>(inline_.data(), n_) : std::span<const Tensor* const>(heap_);
  }

 private:
  static constexpr std::size_t kInline = 6;
  std::array<const Tensor*, kInline> inline_{};
  std::size_t n_ = 0;
  std::vector<const Tensor*> heap_;
};
inline void collect_input(InputList& out, const Tensor& t) { out.push_back(&t); }
inline void collect_input(InputList& out, const Tensors& ts) {
  for (const auto& t : ts) out.push_back(&t);
}
template <class T>
void collect_input(InputList&, const T&) {}

/// The leaf-gradient accessors behind Tensor::grad/set_grad/zero_grad, under the leaf's lock
/// (Note [Leaf accumulation]).
std::shared_ptr<TensorImpl> load_grad(const TensorImpl& impl);
void store_grad(TensorImpl& impl, std::shared_ptr<TensorImpl> grad);
/// Marks `grad` (a tensor that `leaf`'s .grad is or will be set to) so that, while it is the
/// leaf's .grad, backward adds the leaf's gradient into its buffer in place instead of into a new
/// buffer (Note [Leaf accumulation]); under the leaf's lock. For an owner of .grad buffers that
/// nobody reads during backward: DistributedDataParallel's bucket views (Note [Overlapped averaging]).
void set_accumulate_in_place(const Tensor& leaf, const Tensor& grad, bool on);

/// True when `t` could still be given the history of the op being recorded (see Note [Saved tensors]).
inline bool may_become_output(const Tensor& t) { return !t.impl()->grad_fn && !t.impl()->requires_grad; }
/// A saved alias of `node`'s output `output_nr` with that history, when `node` is the node the
/// engine is running in a create_graph backward; else `alias` itself (Note [Saved tensors]).
Tensor saved_output_with_history(const Node& node, const Tensor& alias, std::uint32_t output_nr);
/// True when storage, shape and dtype are the same (a saved alias of an output).
bool same_tensor_data(const Tensor& a, const Tensor& b);
}  // namespace detail

/// Marks (on) or unmarks `grad`, a tensor that the leaf `leaf`'s .grad is or will be set to: while
/// marked and .grad, backward adds the leaf's gradient into its buffer in place, with the bits a new
/// buffer would hold, instead of into a new buffer (Note [Leaf accumulation]; a create_graph backward
/// still records a new sum). For an extension that owns .grad buffers nobody reads during backward
/// and wants the gradients to land in them without a copy: DistributedDataParallel makes each .grad
/// a view of its communication bucket (Note [Overlapped averaging]). Error: an undefined tensor.
inline void set_accumulate_in_place(const Tensor& leaf, const Tensor& grad, bool on) {
  detail::set_accumulate_in_place(leaf, grad, on);
}

template <class Derived>
void Function<Derived>::save_one(const Tensor& t) {
  if (!t.defined()) {
    saved_.emplace_back();
    saved_versions_.push_back(0);
    return;
  }
  saved_.push_back(detail::may_become_output(t) ? t.detach() : t);
  saved_versions_.push_back(t.impl()->storage->version);
}

template <class Derived>
Tensor Function<Derived>::unpack(std::size_t i) const {
  if (i < saved_output_nr_.size() && saved_output_nr_[i] != 0 && GradMode::is_enabled())
    return detail::saved_output_with_history(*this, saved_[i], saved_output_nr_[i] - 1);
  return saved_[i];
}

template <class Derived>
void Function<Derived>::bind_saved_outputs(std::span<const Tensor> outputs) {
  for (std::size_t i = 0; i < saved_.size(); ++i) {
    const Tensor& t = saved_[i];
    if (!t.defined() || !detail::may_become_output(t)) continue;
    for (std::size_t k = 0; k < outputs.size(); ++k) {
      if (!detail::same_tensor_data(t, outputs[k])) continue;
      if (saved_output_nr_.empty()) saved_output_nr_.assign(saved_.size(), 0);
      saved_output_nr_[i] = static_cast<std::uint32_t>(k + 1);
      break;
    }
  }
}

template <class Derived>
Tensors Function<Derived>::saved() const {
  for (std::size_t i = 0; i < saved_.size() || (released_ && i == 0); ++i)
    detail::check_saved(*this, released_, saved_, saved_versions_, i);
  if (saved_output_nr_.empty()) return saved_;
  Tensors out;
  out.reserve(saved_.size());
  for (std::size_t i = 0; i < saved_.size(); ++i) out.push_back(unpack(i));
  return out;
}

template <class Derived>
Tensor Function<Derived>::saved(std::size_t i) const {
  detail::check_saved(*this, released_, saved_, saved_versions_, i);
  return unpack(i);
}

/// Wires a forward's outputs into the graph. Used by apply(); public so that ops with unusual
/// argument lists can call it directly.
struct GraphBuilder {
  /// True when grad mode is on and some defined input requires grad (i.e. a node would be recorded).
  static bool should_record(std::span<const Tensor* const> inputs);
  /// Edges for the inputs; returns false when no input needs a gradient (or grad mode is off).
  static bool make_edges(Node& node, std::span<const Tensor* const> inputs);
  static void set_history(const std::shared_ptr<Node>& node, std::span<Tensor> outputs);
};

/// What apply<F>(args...) needs of a Function type F. A malformed op fails one of these named
/// requirements, and the compiler reports which (instead of an error deep inside apply).
template <class T>
concept TensorOrTensors = std::same_as<T, Tensor> || std::same_as<T, Tensors>;
/// F::kName names the op in error messages and printing.
template <class F>
concept HasOpName = requires {
  { F::kName } -> std::convertible_to<const char*>;
};
/// F::forward(args...) exists for these arguments and returns Tensor or Tensors.
template <class F, class... Args>
concept ForwardCallableWith = requires(F& f, Args&&... args) {
  { f.forward(std::forward<Args>(args)...) } -> TensorOrTensors;
};
/// F::backward(grads) takes one gradient per output and returns one per tensor input.
template <class F>
concept HasBackward = requires(F& f, const Tensors& grads) {
  { f.backward(grads) } -> std::same_as<Tensors>;
};
template <class F, class... Args>
concept FunctionType = std::derived_from<F, Node> && std::default_initializable<F> && HasOpName<F> &&
    ForwardCallableWith<F, Args...> && HasBackward<F>;

namespace detail {
/// Note [Op name in dtype errors]: the name of the Function whose forward runs in this thread (set by
/// apply), so that `dispatch` refusing an integer dtype deep in a kernel, or a result too large to
/// allocate (make_impl in core/tensor.cpp), names the op (null outside).
const char* current_op() noexcept;
class CurrentOpGuard {
 public:
  explicit CurrentOpGuard(const char* name) noexcept;
  ~CurrentOpGuard();
  CurrentOpGuard(const CurrentOpGuard&) = delete;
  CurrentOpGuard& operator=(const CurrentOpGuard&) = delete;

 private:
  const char* prev_;
};
}  // namespace detail

/// Runs F::forward(args...) without recording, and records one node for it when grad mode is on
/// and some tensor input requires grad. Returns what forward returns (Tensor or Tensors).
///
/// Note [apply fast path]: the node is allocated once, in its shared_ptr, before forward runs (no
/// move of a stack Function into the heap afterwards), and the input list lives on the stack: per
/// op this saves several heap allocations, which dominate the cost of ops on small tensors.
template <class F, class... Args>
requires FunctionType<F, Args...>
auto apply(Args&&... args) {
  detail::InputList inputs;
  (detail::collect_input(inputs, args), ...);
  using Out = decltype(std::declval<F&>().forward(std::forward<Args>(args)...));
  const auto run_forward = [&](F& fn) {
    NoGradGuard guard;
    detail::CurrentOpGuard op_name(F::kName);
    return fn.forward(std::forward<Args>(args)...);
  };
  if (!GraphBuilder::should_record(inputs.span())) {
    F fn;
    return run_forward(fn);
  }
  auto node = std::allocate_shared<F>(detail::PoolAllocator<F>{});
  GraphBuilder::make_edges(*node, inputs.span());
  Out out = run_forward(*node);
  if constexpr (std::is_same_v<Out, Tensor>) {
    GraphBuilder::set_history(node, std::span<Tensor>(&out, 1));
  } else {
    GraphBuilder::set_history(node, std::span<Tensor>(out));
  }
  return out;
}

}  // namespace xgrad
