#include "xgrad/core/autograd.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "xgrad/core/detail/thread_state.hpp"
#include "xgrad/core/parallel.hpp"

namespace xgrad {

// ---- grad mode ----------------------------------------------------------------------------------
namespace {
thread_local bool t_grad_enabled = true;
thread_local const char* t_current_op = nullptr;  // Note [Op name in dtype errors]
// The node whose backward the engine runs in this thread under create_graph (Note [Saved tensors]).
thread_local const std::shared_ptr<Node>* t_running_node = nullptr;
std::atomic<std::uint64_t> g_sequence{1};
}  // namespace

bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

namespace detail {
const char* current_op() noexcept { return t_current_op; }
CurrentOpGuard::CurrentOpGuard(const char* name) noexcept : prev_(t_current_op) { t_current_op = name; }
CurrentOpGuard::~CurrentOpGuard() { t_current_op = prev_; }

ThreadState capture_thread_state() noexcept { return {t_grad_enabled, t_current_op, t_running_node}; }

namespace {
void set_thread_state(const ThreadState& s) noexcept {
  t_grad_enabled = s.grad_enabled;
  t_current_op = s.current_op;
  t_running_node = static_cast<const std::shared_ptr<Node>*>(s.running_node);
}
}  // namespace

ThreadStateGuard::ThreadStateGuard(const ThreadState& s) noexcept : prev_(capture_thread_state()) {
  set_thread_state(s);
}
ThreadStateGuard::~ThreadStateGuard() { set_thread_state(prev_); }
}  // namespace detail

// ---- node destruction ---------------------------------------------------------------------------
// Note [Iterative graph destruction]: a chain of a million nodes would be destroyed by a million
// nested destructor calls and overflow the stack. A node whose last owner is the node being
// destroyed is moved to a thread-local list instead, which the outermost destructor drains.
namespace {
thread_local std::vector<std::shared_ptr<Node>> t_graveyard;
thread_local bool t_draining = false;
}  // namespace

Node::~Node() {
  // A predecessor referenced by several of our edges (y = x + x) has use_count > 1 on each of them:
  // drop the extra references here so that the last one is seen as sole owner and deferred too.
  for (auto& e : next_edges_) {
    if (!e.fn) continue;
    if (e.fn.use_count() == 1)
      t_graveyard.push_back(std::move(e.fn));
    else
      e.fn.reset();  // someone else (or a later edge of ours) still owns it
  }
  if (t_draining) return;
  t_draining = true;
  while (!t_graveyard.empty()) {
    auto n = std::move(t_graveyard.back());
    t_graveyard.pop_back();
    n.reset();  // may push more nodes
  }
  t_draining = false;
}

// ---- recording ----------------------------------------------------------------------------------
namespace detail {
void check_saved(const Node& node, bool released, const std::vector<Tensor>& saved,
                 const std::vector<std::uint32_t>& versions, std::size_t index) {
  XGRAD_CHECK(!released,
              "{}: trying to backward through the graph a second time, or after its saved tensors were "
              "freed; pass retain_graph=true to the first backward if you need to backward twice",
              node.name());
  XGRAD_CHECK(index < saved.size(), "{}: saved tensor {} requested but only {} were saved", node.name(), index,
              saved.size());
  const Tensor& t = saved[index];
  XGRAD_CHECK(!t.defined() || t.impl()->storage->version == versions[index],
              "{}: a tensor of shape {} saved for backward was modified by an in-place operation after "
              "it was saved (version {} now, {} when saved)",
              node.name(), shape_str(t.shape()), t.impl()->storage->version, versions[index]);
}
}  // namespace detail

bool GraphBuilder::should_record(std::span<const Tensor* const> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

bool GraphBuilder::make_edges(Node& node, std::span<const Tensor* const> inputs) {
  if (!should_record(inputs)) return false;
  node.next_edges_.resize(inputs.size());
  node.input_meta_.resize(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = *inputs[i];
    if (!t.defined()) continue;
    const auto& impl = t.impl();
    node.input_meta_[i] = TensorMeta{impl->shape, impl->dtype};
    if (impl->grad_fn)
      node.next_edges_[i] = Edge{impl->grad_fn, nullptr, impl->output_nr};
    else if (impl->requires_grad)
      node.next_edges_[i] = Edge{nullptr, impl, 0};
  }
  return true;
}

void GraphBuilder::set_history(const std::shared_ptr<Node>& node, std::span<Tensor> outputs) {
  node->sequence_nr_ = g_sequence.fetch_add(1, std::memory_order_relaxed);
  node->output_meta_.reserve(outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    Tensor& out = outputs[k];
    XGRAD_CHECK(out.defined(), "{}: forward returned an undefined output {}", node->name(), k);
    // An output that aliases an input's TensorImpl (e.g. an identity) must get its own impl so
    // that setting its history does not rewrite the input's.
    if (out.impl()->grad_fn || out.impl()->requires_grad) out = out.detach();
    node->output_meta_.push_back(TensorMeta{out.impl()->shape, out.impl()->dtype});
    out.impl()->grad_fn = node;
    out.impl()->output_nr = static_cast<std::uint32_t>(k);
  }
  node->bind_saved_outputs(std::span<const Tensor>(outputs.data(), outputs.size()));
}

namespace detail {
bool same_tensor_data(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.impl()->storage == b.impl()->storage && a.impl()->shape == b.impl()->shape &&
         a.impl()->dtype == b.impl()->dtype;
}

Tensor saved_output_with_history(const Node& node, const Tensor& alias, std::uint32_t output_nr) {
  if (t_running_node == nullptr || t_running_node->get() != &node) return alias;
  Tensor t = alias.detach();
  t.impl()->grad_fn = *t_running_node;
  t.impl()->output_nr = output_nr;
  return t;
}
}  // namespace detail

void Tensor::retain_grad() {
  check_defined("retain_grad");
  if (!impl_->grad_fn) {
    XGRAD_CHECK(impl_->requires_grad, "retain_grad: tensor of shape {} does not require grad", shape_str(impl_->shape));
    return;  // leaves keep their grad anyway
  }
  auto& r = impl_->grad_fn->retained_outputs_;
  if (r.size() <= impl_->output_nr) r.resize(impl_->output_nr + 1);
  r[impl_->output_nr] = impl_;
  impl_->retains_grad = true;
}

// ---- hooks (Note [Hooks]) -----------------------------------------------------------------------
namespace {
template <class Fn>
void remove_from(std::vector<Fn>* list, unsigned index, const char* op, const char* registrar) {
  const std::size_t n = list ? list->size() : 0;
  XGRAD_CHECK(index < n, "{}: no hook at index {} (this tensor has {} hook(s) registered with {})", op, index, n,
              registrar);
  (*list)[index] = nullptr;
}
}  // namespace

std::vector<std::function<Tensor(const Tensor&)>>* Tensor::pre_hook_list(bool create) const {
  if (impl_->grad_fn) {
    auto& lists = impl_->grad_fn->output_hooks_;
    if (lists.empty()) {
      if (!create) return nullptr;
      // sized once, to the node's outputs: the engine holds a reference into it while hooks run
      lists.resize(impl_->grad_fn->output_meta_.size());
    }
    XGRAD_ASSERT(impl_->output_nr < lists.size());
    return &lists[impl_->output_nr];
  }
  if (!impl_->hooks) {
    if (!create) return nullptr;
    impl_->hooks = std::make_shared<detail::TensorHooks>();
  }
  return &impl_->hooks->pre;
}

unsigned Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  check_defined("register_hook");
  XGRAD_CHECK(hook != nullptr, "register_hook: argument 'hook' is empty (a std::function holding no callable)");
  XGRAD_CHECK(requires_grad(),
              "register_hook: cannot register a hook on a tensor that does not require grad (shape {}); call "
              "set_requires_grad() on the leaf first",
              shape_str(impl_->shape));
  auto* list = pre_hook_list(/*create=*/true);
  list->push_back(std::move(hook));
  return static_cast<unsigned>(list->size() - 1);
}

void Tensor::remove_hook(unsigned index) const {
  check_defined("remove_hook");
  remove_from(pre_hook_list(/*create=*/false), index, "remove_hook", "register_hook");
}

unsigned Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) const {
  check_defined("register_post_accumulate_grad_hook");
  XGRAD_CHECK(hook != nullptr,
              "register_post_accumulate_grad_hook: argument 'hook' is empty (a std::function holding no callable)");
  XGRAD_CHECK(!impl_->grad_fn,
              "register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered on non-leaf "
              "tensors (this one, of shape {}, was produced by '{}'); register it on a leaf, or use register_hook",
              shape_str(impl_->shape), impl_->grad_fn ? impl_->grad_fn->name() : "");
  XGRAD_CHECK(impl_->requires_grad,
              "register_post_accumulate_grad_hook: cannot register a hook on a tensor that does not require grad "
              "(shape {}); call set_requires_grad() first",
              shape_str(impl_->shape));
  if (!impl_->hooks) impl_->hooks = std::make_shared<detail::TensorHooks>();
  auto& list = impl_->hooks->post_accumulate;
  list.push_back(std::move(hook));
  return static_cast<unsigned>(list.size() - 1);
}

void Tensor::remove_post_accumulate_grad_hook(unsigned index) const {
  check_defined("remove_post_accumulate_grad_hook");
  remove_from(impl_->hooks && !impl_->grad_fn ? &impl_->hooks->post_accumulate : nullptr, index,
              "remove_post_accumulate_grad_hook", "register_post_accumulate_grad_hook");
}

// ---- leaf gradient lock (Note [Leaf accumulation]) ----------------------------------------------
namespace detail {
namespace {
constexpr std::size_t kGradStripes = 64;
struct alignas(64) GradStripe {
  std::mutex mutex;
};
GradStripe g_grad_stripes[kGradStripes];  // constant-initialised: usable from any static constructor
std::mutex& grad_mutex(const TensorImpl* impl) {
  // TensorImpls are at least 16-byte aligned and pool-allocated close together: mix the bits above
  // the alignment so that neighbours land on different stripes.
  const auto a = reinterpret_cast<std::uintptr_t>(impl);
  return g_grad_stripes[((a >> 4) ^ (a >> 10) ^ (a >> 16)) % kGradStripes].mutex;
}
}  // namespace

std::shared_ptr<TensorImpl> load_grad(const TensorImpl& impl) {
  std::lock_guard<std::mutex> lock(grad_mutex(&impl));
  return impl.grad;
}

void store_grad(TensorImpl& impl, std::shared_ptr<TensorImpl> grad) {
  {
    std::lock_guard<std::mutex> lock(grad_mutex(&impl));
    impl.grad.swap(grad);
  }
  // the previous gradient (now in `grad`) is freed here, outside the lock
}

void set_accumulate_in_place(const Tensor& leaf, const Tensor& grad, bool on) {
  XGRAD_CHECK(leaf.defined() && grad.defined(), "set_accumulate_in_place: the leaf and the gradient must be defined");
  std::lock_guard<std::mutex> lock(grad_mutex(leaf.impl().get()));
  grad.impl()->accumulate_in_place = on;
}
}  // namespace detail

// ---- engine -------------------------------------------------------------------------------------
namespace {

bool exclusively_owned(const Tensor& t) { return t.impl().use_count() == 1 && t.impl()->storage.use_count() == 1; }

// acc + g recorded on the tape (Note [Create graph]): the sum of two gradients that carry history.
struct GradSum : Function<GradSum> {
  static constexpr const char* kName = "add";
  static constexpr bool kDifferentiableBackward = true;
  Tensor forward(const Tensor& a, const Tensor& b) {
    Tensor out = a.clone_data();
    dispatch(out.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = out.data<T>();
      const T* q = b.data<T>();
      for (std::int64_t i = 0, n = out.numel(); i < n; ++i) p[i] += q[i];
    });
    return out;
  }
  Tensors backward(const Tensors& grads) { return {grads[0], grads[0]}; }
};

bool has_history(const Tensor& t) { return t.defined() && (t.impl()->grad_fn || t.impl()->requires_grad); }

Tensor recorded_sum(const Tensor& a, const Tensor& b) {
  AutoGradMode grad_mode(true);
  return apply<GradSum>(a, b);
}

// Adds g into acc: takes g when acc is empty, adds in place into whichever of the two buffers is
// owned by nobody else (float addition is commutative, so acc + g and g + acc are the same bits),
// and copies only when both are shared.
void accumulate(Tensor& acc, Tensor&& g, bool create_graph = false) {
  if (!acc.defined()) {
    acc = std::move(g);
    return;
  }
  if (create_graph && (has_history(acc) || has_history(g))) {
    acc = recorded_sum(acc, g);
    return;
  }
  if (!exclusively_owned(acc)) {
    if (exclusively_owned(g) && !g.impl()->grad_fn) {
      std::swap(acc, g);
    } else {
      acc = acc.clone_data();
    }
  }
  dispatch(acc.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(acc.impl()->storage->data);
    const T* q = static_cast<const T*>(g.impl()->storage->data);
    const std::int64_t n = acc.impl()->numel;
    if (n == 1) {
      p[0] += q[0];
      return;
    }
    parallel_for(0, n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) p[i] += q[i];
    });
  });
}

// Adds g into acc in place (same shape and dtype; acc's buffer must be owned by the caller).
void add_in_place(Tensor& acc, const Tensor& g) {
  dispatch(acc.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(acc.impl()->storage->data);
    const T* q = static_cast<const T*>(g.impl()->storage->data);
    const std::int64_t n = acc.impl()->numel;
    const auto add = [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) p[i] += q[i];
    };
    if (n <= kParallelGrain || get_num_threads() == 1) {
      add(0, n);
      return;
    }
    // Runs under a leaf lock: parallel_for is isolated (Note [Task state]), so this thread, while it
    // waits for the chunks, does not pick up an unrelated task that could ask for the same lock.
    parallel_for(0, n, kParallelGrain, add);
  });
}

// .grad accumulation into a leaf (or a retained non-leaf), once per backward and leaf (Note [Leaf
// accumulation]): never shares the gradient's buffer with anything else, so a later in-place
// accumulation cannot leak into another tensor, and never writes into the buffer .grad held before,
// which a reader on another thread may hold. The add runs under the leaf's lock, the copy (if any)
// before it.
void accumulate_into_grad(TensorImpl& impl, Tensor g, bool create_graph = false) {
  if (create_graph && has_history(g)) {
    // Note [Create graph]: .grad becomes the recorded sum (a new tensor with history); the buffer
    // .grad held before is only read.
    std::shared_ptr<TensorImpl> previous;
    std::lock_guard<std::mutex> lock(detail::grad_mutex(&impl));
    if (impl.grad) {
      XGRAD_CHECK(impl.grad->shape == g.impl()->shape && impl.grad->dtype == g.impl()->dtype,
                  "backward: the accumulated .grad has shape {} {} but the new gradient has shape {} {}",
                  shape_str(impl.grad->shape), impl.grad->dtype, shape_str(g.shape()), g.dtype());
      g = recorded_sum(Tensor(impl.grad), g);
    }
    previous = g.impl();
    impl.grad.swap(previous);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(detail::grad_mutex(&impl));
    if (impl.grad && impl.grad->accumulate_in_place) {  // the owner's buffer (detail::set_accumulate_in_place)
      XGRAD_CHECK(impl.grad->shape == g.impl()->shape && impl.grad->dtype == g.impl()->dtype,
                  "backward: the accumulated .grad has shape {} {} but the new gradient has shape {} {}",
                  shape_str(impl.grad->shape), impl.grad->dtype, shape_str(g.shape()), g.dtype());
      Tensor acc(impl.grad);
      add_in_place(acc, g);  // grad + g: the same bits as the new buffer below would hold
      ++impl.grad->storage->version;
      return;
    }
  }
  if (!exclusively_owned(g) || g.grad_fn()) g = g.clone_data();
  std::shared_ptr<TensorImpl> previous = g.impl();
  {
    std::lock_guard<std::mutex> lock(detail::grad_mutex(&impl));
    if (impl.grad) {
      XGRAD_CHECK(impl.grad->shape == g.impl()->shape && impl.grad->dtype == g.impl()->dtype,
                  "backward: the accumulated .grad has shape {} {} but the new gradient has shape {} {}",
                  shape_str(impl.grad->shape), impl.grad->dtype, shape_str(g.shape()), g.dtype());
      add_in_place(g, Tensor(impl.grad));  // grad + g and g + grad are the same bits
    }
    impl.grad.swap(previous);
  }
  // the previous gradient (now in `previous`) is freed here, outside the lock
}

// Note [Hooks]: runs a tensor's register_hook hooks on its gradient g, in registration order; a
// hook's defined result replaces g. Each hook is copied before it runs, and the list re-read after
// it, so a hook may register or remove hooks of this tensor (the list may grow or reallocate).
Tensor run_hooks(const std::vector<std::function<Tensor(const Tensor&)>>& hooks, Tensor g, bool create_graph) {
  AutoGradMode grad_mode(create_graph);
  for (std::size_t i = 0; i < hooks.size(); ++i) {
    if (!hooks[i]) continue;  // removed
    const std::function<Tensor(const Tensor&)> hook = hooks[i];
    Tensor r = hook(g);
    if (!r.defined()) continue;
    XGRAD_CHECK(r.shape() == g.shape() && r.dtype() == g.dtype(),
                "register_hook: hook {} returned a gradient of shape {} {} for a gradient of shape {} {} (a hook "
                "returns a tensor of the gradient's shape and dtype, or an undefined Tensor to keep it)",
                i, shape_str(r.shape()), r.dtype(), shape_str(g.shape()), g.dtype());
    g = std::move(r);
  }
  return g;
}

// Note [Hooks]: a leaf's post-accumulate-grad hooks, once its gradient for this backward is in .grad.
void run_post_accumulate_hooks(const std::shared_ptr<TensorImpl>& leaf, bool create_graph) {
  // the hooks object stays alive while they run, even if a hook replaced the leaf's
  const std::shared_ptr<detail::TensorHooks> hooks = leaf->hooks;
  AutoGradMode grad_mode(create_graph);
  Tensor t(leaf);
  for (std::size_t i = 0; i < hooks->post_accumulate.size(); ++i) {
    if (!hooks->post_accumulate[i]) continue;
    const std::function<void(Tensor&)> hook = hooks->post_accumulate[i];
    hook(t);
  }
}

struct Task {
  std::shared_ptr<Node> node;
  Tensors grads;  // one per output
};

void check_grad(const Node& node, std::size_t i, const Tensor& g) {
  const auto& meta = node.input_meta()[i];
  XGRAD_CHECK(g.shape() == meta.shape && g.dtype() == meta.dtype,
              "backward of '{}': gradient for input {} has shape {} {} but the input has shape {} {}", node.name(), i,
              shape_str(g.shape()), g.dtype(), shape_str(meta.shape), meta.dtype);
}

// Note [Engine index]: the engine maps nodes to their tasks (and leaves to their pending sums). Most
// graphs handed to backward are small (a handful of ops), where a linear scan of a flat vector beats
// hashing (no allocation per node); past kLinearIndexLimit entries the engine switches to a hash map.
constexpr std::size_t kLinearIndexLimit = 48;

template <class Key>
struct PtrIndex {
  std::vector<const Key*> keys;  // entry i's key, while linear
  std::unordered_map<const Key*, std::size_t> map;
  bool hashed = false;

  // Index of k, or npos.
  std::size_t find(const Key* k) const {
    if (hashed) {
      auto it = map.find(k);
      return it == map.end() ? npos : it->second;
    }
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == k) return i;
    return npos;
  }
  std::size_t at(const Key* k) const {
    const std::size_t i = find(k);
    XGRAD_ASSERT(i != npos);
    return i;
  }
  void add(const Key* k, std::size_t i) {
    if (!hashed && keys.size() < kLinearIndexLimit) {
      keys.push_back(k);
      return;
    }
    if (!hashed) {
      map.reserve(4 * kLinearIndexLimit);
      for (std::size_t j = 0; j < keys.size(); ++j) map.emplace(keys[j], j);
      hashed = true;
    }
    map.emplace(k, i);
  }
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
};

// One leaf's gradient within a backward (Note [Leaf accumulation]): the contributions summed so far,
// and how many edges to it belong to nodes that have not run yet.
struct LeafSlot {
  std::shared_ptr<TensorImpl> leaf;
  std::size_t pending_edges = 0;
  Tensor sum;
};

}  // namespace

namespace detail {
// Points a node's needs_input_grad at a pruned grad() run's mask while its backward runs.
struct InputMaskScope {
  Node& node;
  InputMaskScope(Node& n, const std::uint8_t* mask) : node(n) { node.input_mask_ = mask; }
  ~InputMaskScope() { node.input_mask_ = nullptr; }
  InputMaskScope(const InputMaskScope&) = delete;
  InputMaskScope& operator=(const InputMaskScope&) = delete;
};
}  // namespace detail

namespace {

// Publishes the node the engine runs under create_graph (Note [Saved tensors]).
struct RunningNodeScope {
  const std::shared_ptr<Node>* prev;
  explicit RunningNodeScope(const std::shared_ptr<Node>& n) : prev(t_running_node) { t_running_node = &n; }
  ~RunningNodeScope() { t_running_node = prev; }
  RunningNodeScope(const RunningNodeScope&) = delete;
  RunningNodeScope& operator=(const RunningNodeScope&) = delete;
};

struct Engine {
  std::vector<Task> tasks;
  PtrIndex<Node> index;
  // backward(): per-leaf sums, delivered to .grad once per leaf (Note [Leaf accumulation]).
  std::vector<LeafSlot> leaves;
  PtrIndex<TensorImpl> leaf_index;
  // For autograd::grad: capture gradients of chosen tensors instead of writing .grad.
  std::unordered_map<const TensorImpl*, Tensor>* captures = nullptr;
  std::unordered_map<const Node*, std::vector<std::pair<std::uint32_t, const TensorImpl*>>> capture_outputs;
  bool create_graph = false;  // Note [Create graph]

  std::size_t task_of(const std::shared_ptr<Node>& n) {
    const std::size_t found = index.find(n.get());
    if (found != PtrIndex<Node>::npos) return found;
    index.add(n.get(), tasks.size());
    tasks.push_back(Task{n, Tensors(n->output_meta().size())});
    return tasks.size() - 1;
  }

  LeafSlot& slot_of(const std::shared_ptr<TensorImpl>& leaf) {
    const std::size_t found = leaf_index.find(leaf.get());
    if (found != PtrIndex<TensorImpl>::npos) return leaves[found];
    leaf_index.add(leaf.get(), leaves.size());
    leaves.push_back(LeafSlot{leaf, 0, Tensor()});
    return leaves.back();
  }

  void gather(const std::vector<std::shared_ptr<Node>>& roots) {
    std::vector<Node*> stack;
    for (const auto& r : roots) {
      const auto before = tasks.size();
      task_of(r);
      if (tasks.size() > before) stack.push_back(r.get());
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const auto& e : n->next_edges()) {
        if (e.leaf && !captures) ++slot_of(e.leaf).pending_edges;
        if (!e.fn) continue;
        const auto before = tasks.size();
        task_of(e.fn);
        if (tasks.size() > before) stack.push_back(e.fn.get());
      }
    }
  }

  void deliver_leaf(const std::shared_ptr<TensorImpl>& leaf, Tensor&& g) {
    if (captures) {
      auto it = captures->find(leaf.get());
      if (it != captures->end()) accumulate(it->second, std::move(g), create_graph);
      return;
    }
    accumulate(slot_of(leaf).sum, std::move(g), create_graph);
  }

  void flush(LeafSlot& slot) const {
    if (!slot.sum.defined()) return;
    Tensor sum = std::move(slot.sum);
    slot.sum = Tensor();
    if (slot.leaf->hooks == nullptr) {
      accumulate_into_grad(*slot.leaf, std::move(sum), create_graph);
      return;
    }
    // Note [Hooks]: the leaf's hooks on this backward's sum, the add, then its post-accumulate hooks
    const std::shared_ptr<detail::TensorHooks> hooks = slot.leaf->hooks;
    if (!hooks->pre.empty()) sum = run_hooks(hooks->pre, std::move(sum), create_graph);
    accumulate_into_grad(*slot.leaf, std::move(sum), create_graph);
    if (!hooks->post_accumulate.empty()) run_post_accumulate_hooks(slot.leaf, create_graph);
  }

  // After a node has run (or was skipped): its edges to leaves are done; a leaf none of whose
  // producers is left gets its sum.
  void leaf_edges_done(const Node& node) {
    if (captures) return;
    for (const auto& e : node.next_edges()) {
      if (!e.leaf) continue;
      LeafSlot& slot = leaves[leaf_index.at(e.leaf.get())];
      if (--slot.pending_edges == 0) flush(slot);
    }
  }

  // Note [Pruned grad]: masks[t][i] is 1 when task t's input i leads to a requested input. Edges
  // point to earlier nodes, so one pass in increasing sequence order settles every node.
  std::vector<std::vector<std::uint8_t>> prune(const std::vector<std::size_t>& order) const {
    std::vector<std::vector<std::uint8_t>> masks(tasks.size());
    std::vector<std::uint8_t> wanted(tasks.size(), 0);  // gradients flowing into task t are used
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const std::size_t ti = *it;
      const Node& node = *tasks[ti].node;
      auto& mask = masks[ti];
      mask.assign(node.num_inputs(), 0);
      bool any = false;
      for (std::size_t i = 0; i < node.num_inputs(); ++i) {
        const Edge& e = node.next_edges()[i];
        const bool use = e.fn ? wanted[index.at(e.fn.get())] != 0 : (e.leaf && captures->count(e.leaf.get()) != 0);
        mask[i] = use ? 1 : 0;
        any = any || use;
      }
      wanted[ti] = (any || capture_outputs.count(&node) != 0) ? 1 : 0;
    }
    return masks;
  }

  void run(bool retain_graph) {
    std::vector<std::size_t> order(tasks.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return tasks[a].node->sequence_nr() > tasks[b].node->sequence_nr();
    });
    const auto masks = captures ? prune(order) : std::vector<std::vector<std::uint8_t>>();
    for (std::size_t ti : order) {
      Task& task = tasks[ti];
      Node& node = *task.node;
      const std::uint8_t* mask = captures ? masks[ti].data() : nullptr;
      bool any = false;
      for (const auto& g : task.grads) any = any || g.defined();
      bool runs = any;
      if (mask) runs = runs && std::any_of(masks[ti].begin(), masks[ti].end(), [](std::uint8_t m) { return m != 0; });
      if (any) {
        for (std::size_t k = 0; k < task.grads.size(); ++k)
          if (!task.grads[k].defined())
            task.grads[k] = Tensor::zeros(node.output_meta()[k].shape, node.output_meta()[k].dtype);
        if (!node.output_hooks_for_engine().empty() && (runs || capture_outputs.count(&node) != 0))
          run_output_hooks(node, task.grads);
        handle_retained(node, task.grads);
      }
      if (runs) {
        Tensors in_grads;
        if (create_graph) {
          XGRAD_CHECK(node.supports_create_graph(),
                      "{}: create_graph=true (a differentiable backward, for higher-order gradients) is not supported "
                      "by this op: its backward is not written with differentiable ops (docs/concepts.md lists the "
                      "ops that support it)",
                      node.name());
          detail::InputMaskScope scope(node, mask);
          AutoGradMode grad_mode(true);
          RunningNodeScope running(task.node);
          in_grads = node.apply(std::move(task.grads));
        } else {
          detail::InputMaskScope scope(node, mask);
          in_grads = node.apply(std::move(task.grads));
        }
        XGRAD_CHECK(in_grads.size() == node.num_inputs(), "backward of '{}' returned {} gradients for {} inputs",
                    node.name(), in_grads.size(), node.num_inputs());
        for (std::size_t i = 0; i < in_grads.size(); ++i) {
          const Edge& e = node.next_edges()[i];
          if (!e.valid() || !in_grads[i].defined() || (mask && mask[i] == 0)) continue;
          check_grad(node, i, in_grads[i]);
          if (e.fn) {
            Task& dst = tasks[index.at(e.fn.get())];
            accumulate(dst.grads[e.input_nr], std::move(in_grads[i]), create_graph);
          } else {
            deliver_leaf(e.leaf, std::move(in_grads[i]));
          }
        }
      }
      task.grads.clear();
      leaf_edges_done(node);
      if (!retain_graph) node.release_saved();
    }
    for (auto& slot : leaves) flush(slot);  // leaves given a seed as roots, reached by no edge
  }

  // Note [Hooks]: the register_hook hooks of the node's outputs, on their summed gradients.
  void run_output_hooks(const Node& node, Tensors& grads) const {
    const auto& lists = node.output_hooks_for_engine();
    for (std::size_t k = 0; k < lists.size() && k < grads.size(); ++k)
      if (!lists[k].empty()) grads[k] = run_hooks(lists[k], std::move(grads[k]), create_graph);
  }

  // Note [Hooks]: in grad(), a requested leaf's hooks run once, on its captured sum, in the order of
  // `inputs` (its non-leaf inputs had theirs on their node's output gradient).
  void run_captured_leaf_hooks(const Tensors& inputs) {
    std::vector<const TensorImpl*> done;
    for (const auto& in : inputs) {
      const TensorImpl* impl = in.impl().get();
      if (impl->grad_fn || !impl->hooks || impl->hooks->pre.empty()) continue;
      if (std::find(done.begin(), done.end(), impl) != done.end()) continue;
      done.push_back(impl);
      Tensor& g = (*captures)[impl];
      if (g.defined()) {
        const std::shared_ptr<detail::TensorHooks> hooks = impl->hooks;
        g = run_hooks(hooks->pre, std::move(g), create_graph);
      }
    }
  }

  void handle_retained(const Node& node, const Tensors& grads) {
    if (captures) {
      auto it = capture_outputs.find(&node);
      if (it != capture_outputs.end())
        for (auto [k, impl] : it->second) {
          Tensor copy = create_graph && has_history(grads[k]) ? grads[k] : grads[k].clone_data();
          accumulate((*captures)[impl], std::move(copy), create_graph);
        }
      return;
    }
    for (std::size_t k = 0; k < node.retained_outputs_for_engine().size() && k < grads.size(); ++k)
      if (auto impl = node.retained_outputs_for_engine()[k].lock()) accumulate_into_grad(*impl, grads[k], create_graph);
  }
};

Tensor seed_for(const Tensor& root, const Tensor& g, const char* op) {
  XGRAD_CHECK(root.defined(), "{}: called on an undefined tensor", op);
  XGRAD_CHECK(root.requires_grad(),
              "{}: tensor of shape {} does not require grad and has no grad_fn (did you forget "
              "set_requires_grad(), or run under NoGradGuard?)",
              op, shape_str(root.shape()));
  if (!g.defined()) {
    XGRAD_CHECK(root.numel() == 1,
                "{}: grad can be implicitly created only for one-element outputs; the output has shape {} — "
                "pass a gradient of that shape",
                op, shape_str(root.shape()));
    return Tensor::ones(root.shape(), root.dtype());
  }
  XGRAD_CHECK(g.shape() == root.shape() && g.dtype() == root.dtype(),
              "{}: gradient of shape {} {} does not match output of shape {} {}", op, shape_str(g.shape()), g.dtype(),
              shape_str(root.shape()), root.dtype());
  return g;
}

void seed_roots(Engine& eng, const Tensors& roots, const Tensors& grad_roots, const char* op) {
  XGRAD_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), "{}: {} outputs but {} gradients", op,
              roots.size(), grad_roots.size());
  std::vector<std::shared_ptr<Node>> nodes;
  for (const auto& r : roots) {
    XGRAD_CHECK(r.defined(), "{}: called on an undefined tensor", op);
    if (r.grad_fn()) nodes.push_back(r.grad_fn());
  }
  eng.gather(nodes);
  for (std::size_t i = 0; i < roots.size(); ++i) {
    Tensor s = seed_for(roots[i], grad_roots.empty() ? Tensor() : grad_roots[i], op);
    const auto& r = roots[i];
    if (r.grad_fn()) {
      Task& t = eng.tasks[eng.index.at(r.grad_fn().get())];
      Tensor copy = s;
      accumulate(t.grads[r.impl()->output_nr], std::move(copy), eng.create_graph);
    } else {
      eng.deliver_leaf(r.impl(), eng.create_graph && has_history(s) ? s : s.clone_data());
    }
  }
}

}  // namespace

const std::vector<std::weak_ptr<TensorImpl>>& Node::retained_outputs_for_engine() const { return retained_outputs_; }

void run_backward(const Tensors& roots, const Tensors& grad_roots, std::optional<bool> retain_graph,
                  bool create_graph) {
  NoGradGuard no_grad;
  Engine eng;
  eng.create_graph = create_graph;
  seed_roots(eng, roots, grad_roots, "backward");
  eng.run(retain_graph.value_or(create_graph));
}

Tensors grad(const Tensors& outputs, const Tensors& inputs, const Tensors& grad_outputs,
             std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  NoGradGuard no_grad;
  Engine eng;
  eng.create_graph = create_graph;
  std::unordered_map<const TensorImpl*, Tensor> captures;
  for (const auto& in : inputs) {
    XGRAD_CHECK(in.defined() && in.requires_grad(), "grad: input of shape {} does not require grad",
                in.defined() ? shape_str(in.shape()) : "undefined");
    captures.try_emplace(in.impl().get());
    if (in.grad_fn()) eng.capture_outputs[in.grad_fn().get()].emplace_back(in.impl()->output_nr, in.impl().get());
  }
  eng.captures = &captures;
  seed_roots(eng, outputs, grad_outputs, "grad");
  eng.run(retain_graph.value_or(create_graph));
  eng.run_captured_leaf_hooks(inputs);
  Tensors result;
  for (const auto& in : inputs) {
    Tensor g = captures[in.impl().get()];
    XGRAD_CHECK(g.defined() || allow_unused,
                "grad: one of the inputs (shape {}) was not used to compute the outputs; pass allow_unused=true",
                shape_str(in.shape()));
    result.push_back(g);
  }
  return result;
}

}  // namespace xgrad
