#pragma once
// Note [Task state]: grad mode, the op being run (for error messages) and the node whose backward
// runs are thread-local. A parallel call's chunks run on other threads, and a thread that waits for
// its own chunks may run chunks of any call that is waiting in the same isolation region. So every
// chunk runs under the state of the thread that started its call (captured at the call, set for the
// chunk, restored after it), and every parallel call is isolated (core/parallel.cpp): a thread
// waiting inside one call's chunk runs only that call's chunks, never a chunk of the call around it,
// whose state (and locks, such as a std::call_once in progress) it would otherwise run inside.
namespace xgrad::detail {

struct ThreadState {
  bool grad_enabled;
  const char* current_op;
  const void* running_node;
};

/// This thread's state, to carry into the chunks of a parallel call it starts.
ThreadState capture_thread_state() noexcept;

/// Sets this thread's state to `s` for the guard's lifetime.
class ThreadStateGuard {
 public:
  explicit ThreadStateGuard(const ThreadState& s) noexcept;
  ~ThreadStateGuard();
  ThreadStateGuard(const ThreadStateGuard&) = delete;
  ThreadStateGuard& operator=(const ThreadStateGuard&) = delete;

 private:
  ThreadState prev_;
};

}  // namespace xgrad::detail
