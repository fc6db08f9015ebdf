// The process group: MPI's start and end (init, finalize, MpiContext, abort), this rank and the
// world size, and the waiting every collective of xgrad::distributed goes through (timeouts, ranks
// that left, no busy polling: Notes [Waiting in collectives] and [Leaving]). The other files of the
// target reach the waiting through detail/process_group.hpp.
#include "xgrad/distributed/detail/process_group.hpp"

#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <thread>

#include "xgrad/core/error.hpp"
#include "xgrad/distributed/distributed.hpp"

namespace xgrad::distributed {

namespace {

// ---- waiting: timeouts, ranks that left, no busy polling ----------------------------------------
// Note [Waiting in collectives]: every transfer of a collective, bulk data included, is non-blocking
// (MPI_I...; point-to-point MPI_Isend/MPI_Irecv for the rings) and completed by wait(), which calls
// MPI_Test (what drives Open MPI's progress) until the request completes, and aborts the job
// (MPI_Abort, after a message on stderr naming this rank, the collective, its call number and the MPI
// call it waits in)
//  - when the collective timeout passes (set_timeout, XGRAD_DISTRIBUTED_TIMEOUT; 5 minutes by default),
//    counted from the start of the collective (the `start` every wait of it is given), not of each
//    transfer, or
//  - when another rank has left main (its MpiContext finalised, Note [Leaving]) and the collective has
//    not completed kStrandedGrace later: a rank that already took part in the collective before
//    leaving lets it complete at once, so only a collective it never joined waits that long.
// No plain blocking MPI call follows a started collective: a rank that stalls in the middle of a
// transfer (a stopped process, a frozen host) is caught by the timeout as one that never arrived
// (tests/distributed/fault_drill.cpp). Open MPI's blocking collectives used to carry the bulk
// transfers after an MPI_Ibarrier, as they measured faster than its non-blocking ones on 4-25 MiB
// buckets (bench/results/tuning_notes.md, "Blocking collectives before libnbc"), but once inside one,
// nothing could end the wait.
// For the first kSpin of a wait it tests in a loop with sched_yield (a collective of a training step
// completes within it, at the latency of a blocking call), then sleeps kNap between tests, so a rank
// that waits for a slow peer uses little CPU. A bulk transfer moves on only inside MPI calls (no
// progress thread in Open MPI's TCP transport), one socket's worth per test, so naps between tests
// throttle it, badly on a loaded host (the fault drill's ZeRO all-gather then missed its timeout):
// the collectives with large transfers therefore first wait, napping, until every rank has arrived
// (arrive_collective: an MPI_Ibarrier), then test the transfer in a sched_yield loop to the end
// (wait_transfer), as Open MPI's blocking calls do, within the same deadline. Open MPI's own blocking
// calls poll (spin) too; init() also sets mpi_yield_when_idle unless the user chose
// (docs/distributed.md, "Failures and hangs").
//
// Note [Leaving]: init() duplicates MPI_COMM_WORLD into a communicator of its own and posts a receive
// on it. A rank that finalises (MpiContext's destructor on a normal return, or finalize()) first sends
// a one-int notice on it to every other rank, then waits until every other rank has sent it its own:
// Open MPI's MPI_Finalize waits for every rank anyway, and this way every notice is matched. A rank
// waiting in a collective learns from a notice that the sender will never join it.
constexpr int kLeaveTag = 7001;
constexpr auto kSpin = std::chrono::milliseconds(20);
constexpr auto kNap = std::chrono::microseconds(200);
constexpr auto kStrandedGrace = std::chrono::seconds(5);

// Only the thread that initialised MPI touches this state (DistributedDataParallel's progress thread
// only starts, tests and finishes its own buckets' requests), so it is not locked.
struct WaitState {
  MPI_Comm leave_comm = MPI_COMM_NULL;
  MPI_Request leave_req = MPI_REQUEST_NULL;
  int leave_msg = 0;
  int notices = 0;      // notices received (ranks that left)
  int first_left = -1;  // the first rank that left
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};
WaitState& wait_state() {
  static WaitState s;
  return s;
}

// The thread level MPI granted (MPI_THREAD_SERIALIZED asked; Note [Progress thread] in data_parallel.cpp).
int g_thread_level = MPI_THREAD_SINGLE;

// Takes the notices that have arrived; re-posts the receive while more can come.
void poll_leave_notices() {
  WaitState& st = wait_state();
  const int others = detail::world_size_raw() - 1;
  while (st.leave_req != MPI_REQUEST_NULL) {
    int done = 0;
    MPI_Status status;
    detail::mpi(MPI_Test, &st.leave_req, &done, &status);
    if (done == 0) return;
    ++st.notices;
    if (st.first_left < 0) st.first_left = status.MPI_SOURCE;
    if (st.notices < others)
      detail::mpi(MPI_Irecv, &st.leave_msg, 1, MPI_INT, MPI_ANY_SOURCE, kLeaveTag, st.leave_comm, &st.leave_req);
    else
      st.leave_req = MPI_REQUEST_NULL;
  }
}

// Note [Ended while waiting]: when a rank dies (SIGKILL, std::terminate) or calls MPI_Abort, Open MPI's
// launcher ends the others with SIGTERM (then SIGKILL): they never get to print where they were. So
// while a rank waits in a collective (wait_until) or in finalize (leave), the collective's name is
// kept in a fixed buffer, and init() installs a SIGTERM handler (unless the program has its own) that
// writes "xgrad::distributed: rank R: ended by SIGTERM ... while waiting in <the collective>" to
// stderr with write(2) (async-signal-safe), then ends the process by the default action.
constexpr std::size_t kWaitingMax = 1024;
char g_waiting_what[kWaitingMax];
std::atomic<std::size_t> g_waiting_len{0};  // 0: not waiting
char g_rank_prefix[64];
std::size_t g_rank_prefix_len = 0;

void write_all(const char* s, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

extern "C" void on_sigterm(int sig) {
  const std::size_t len = g_waiting_len.load();
  if (len > 0) {
    static constexpr char kMid[] =
        "ended by SIGTERM (the launcher ends the job, usually after another rank failed) "
        "while waiting in ";
    write_all(g_rank_prefix, g_rank_prefix_len);
    write_all(kMid, sizeof(kMid) - 1);
    write_all(g_waiting_what, len);
    write_all("\n", 1);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// After MPI_Init: the handler, unless SIGTERM already has one (the program's, or the MPI library's).
void install_sigterm_note() {
  const int n =
      std::snprintf(g_rank_prefix, sizeof(g_rank_prefix), "xgrad::distributed: rank %d: ", detail::rank_raw());
  g_rank_prefix_len = n > 0 ? std::min(static_cast<std::size_t>(n), sizeof(g_rank_prefix) - 1) : 0;
  struct sigaction old {};
  if (::sigaction(SIGTERM, nullptr, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
}

// RAII: names the collective this thread waits in for the SIGTERM handler while it lives.
class WaitingIn {
 public:
  explicit WaitingIn(const std::string& what) {
    g_waiting_len.store(0);
    const std::size_t n = std::min(what.size(), kWaitingMax);
    std::memcpy(g_waiting_what, what.data(), n);
    g_waiting_len.store(n);
  }
  ~WaitingIn() { g_waiting_len.store(0); }
  WaitingIn(const WaitingIn&) = delete;
  WaitingIn& operator=(const WaitingIn&) = delete;
};

[[noreturn]] void abort_job(const std::string& message) {
  g_waiting_len.store(0);  // this message says it
  std::fprintf(stderr, "xgrad::distributed: rank %d: %s; aborting the job\n", detail::rank_raw(), message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

// Completes `req`, a collective named by `what` (Note [Waiting in collectives]).
// Calls `test` (which makes progress and returns true when the collective is complete) until it
// returns true, with the timeout, stranded-rank and sleeping rules of wait().
template <class Test>
void wait_until(Test&& test, const std::string& what, std::chrono::steady_clock::time_point start,
                bool transfer = false) {
  using clock = std::chrono::steady_clock;
  WaitState& st = wait_state();
  const WaitingIn waiting(what);
  clock::time_point stranded_since{};
  bool stranded = false;
  for (;;) {
    if (test()) return;
    poll_leave_notices();
    const auto now = clock::now();
    if (st.first_left >= 0 && !stranded) {
      stranded = true;
      stranded_since = now;
    }
    if (stranded && now - stranded_since > kStrandedGrace)
      abort_job(fmt::format("{} waits for rank {}, which has left main (returned or finalised without joining it)",
                            what, st.first_left));
    if (now - start > st.timeout)
      abort_job(
          fmt::format("{} did not complete within the collective timeout of {} s (another rank is stuck, "
                      "or slower than the timeout allows: xgrad::distributed::set_timeout, "
                      "XGRAD_DISTRIBUTED_TIMEOUT)",
                      what, static_cast<double>(st.timeout.count()) / 1000.0));
    if (transfer || now - start < kSpin)
      sched_yield();
    else
      std::this_thread::sleep_for(kNap);
  }
}

void wait(MPI_Request* reqs, int count, const std::string& what, std::chrono::steady_clock::time_point start,
          bool transfer = false) {
  wait_until(
      [&] {
        int done = 0;
        detail::mpi(MPI_Testall, count, reqs, &done, MPI_STATUSES_IGNORE);
        return done != 0;
      },
      what, start, transfer);
}

// Reads XGRAD_DISTRIBUTED_TIMEOUT (seconds, > 0) into the timeout, once, at init.
void read_timeout_env() {
  const char* v = std::getenv("XGRAD_DISTRIBUTED_TIMEOUT");
  if (v == nullptr || *v == '\0') return;
  char* end = nullptr;
  const double seconds = std::strtod(v, &end);
  XGRAD_CHECK(end != v && *end == '\0' && seconds > 0 && seconds < 1e9,
              "distributed::init: environment variable XGRAD_DISTRIBUTED_TIMEOUT must be a positive number of "
              "seconds, got '{}'",
              v);
  wait_state().timeout = std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0 + 0.5));
}

// After MPI is initialised: the leave communicator and its first receive (Note [Leaving]). Collective.
void setup_leave_notices() {
  MPI_Query_thread(&g_thread_level);
  WaitState& st = wait_state();
  if (st.leave_comm != MPI_COMM_NULL) return;
  detail::mpi(MPI_Comm_dup, MPI_COMM_WORLD, &st.leave_comm);
  if (detail::world_size_raw() > 1)
    detail::mpi(MPI_Irecv, &st.leave_msg, 1, MPI_INT, MPI_ANY_SOURCE, kLeaveTag, st.leave_comm, &st.leave_req);
}

// Before MPI_Finalize: tell every other rank, then wait for theirs (Note [Leaving]).
void leave() {
  WaitState& st = wait_state();
  if (st.leave_comm == MPI_COMM_NULL) return;
  const int n = detail::world_size_raw(), me = detail::rank_raw();
  std::vector<MPI_Request> sends;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    sends.emplace_back();
    detail::mpi(MPI_Isend, &me, 1, MPI_INT, r, kLeaveTag, st.leave_comm, &sends.back());
  }
  // The collective timeout bounds this wait too: a rank that never leaves main (stuck, stopped)
  // must not keep the others in finalize for ever.
  const auto start = std::chrono::steady_clock::now();
  const WaitingIn waiting("finalize (waiting for the other ranks to leave main)");
  for (;;) {
    poll_leave_notices();
    int done = 0;
    detail::mpi(MPI_Testall, static_cast<int>(sends.size()), sends.data(), &done, MPI_STATUSES_IGNORE);
    if (done != 0 && st.leave_req == MPI_REQUEST_NULL) break;
    if (std::chrono::steady_clock::now() - start > st.timeout)
      abort_job(
          fmt::format("finalize: {} of the {} other ranks did not leave main within the collective timeout of "
                      "{} s (a rank is stuck, or works alone for longer than the timeout allows: "
                      "xgrad::distributed::set_timeout, XGRAD_DISTRIBUTED_TIMEOUT)",
                      n - 1 - st.notices, n - 1, static_cast<double>(st.timeout.count()) / 1000.0));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  detail::mpi(MPI_Comm_free, &st.leave_comm);
  st.leave_comm = MPI_COMM_NULL;
}

// Open MPI polls while it waits; yielding lets other processes of an oversubscribed host run
// (docs/distributed.md, "Failures and hangs"). Set before MPI_Init, unless the user set it.
void default_yield_when_idle() { setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0); }
}  // namespace

namespace detail {
std::mutex& mpi_mutex() {
  static std::mutex m;
  return m;
}

// Every public function that communicates starts here: MPI must be up, and no progress thread may
// call MPI while this thread does (Note [Progress thread] in data_parallel.cpp).
void require_mpi(const char* fn) {
  XGRAD_CHECK(is_initialized(), "{}: MPI is not initialised (create an xgrad::distributed::MpiContext in main first)",
              fn);
  quiesce();
}

void wait_collective(MPI_Request& req, const std::string& what, Clock::time_point start) { wait(&req, 1, what, start); }
void wait_collective(std::vector<MPI_Request>& reqs, const std::string& what, Clock::time_point start) {
  wait(reqs.data(), static_cast<int>(reqs.size()), what, start);
}
void wait_until(const std::function<bool()>& done, const std::string& what, Clock::time_point start) {
  distributed::wait_until(done, what, start);
}
void arrive_collective(const std::string& what, Clock::time_point start) {
  MPI_Request req;
  detail::mpi(MPI_Ibarrier, MPI_COMM_WORLD, &req);
  wait(&req, 1, what + ": MPI_Ibarrier (every rank arrives)", start);
}
void wait_transfer(MPI_Request& req, const std::string& what, Clock::time_point start) {
  wait(&req, 1, what, start, /*transfer=*/true);
}
void wait_transfer(std::vector<MPI_Request>& reqs, const std::string& what, Clock::time_point start) {
  wait(reqs.data(), static_cast<int>(reqs.size()), what, start, /*transfer=*/true);
}

// MPI_COMM_WORLD's size and this rank, read once (they never change): asking them makes no MPI call,
// so any thread may (Note [Progress thread] in data_parallel.cpp).
int world_size_raw() {
  static const int n = [] {
    int v = 1;
    detail::mpi(MPI_Comm_size, MPI_COMM_WORLD, &v);
    return v;
  }();
  return n;
}
int rank_raw() {
  static const int r = [] {
    int v = 0;
    detail::mpi(MPI_Comm_rank, MPI_COMM_WORLD, &v);
    return v;
  }();
  return r;
}
int thread_level() { return g_thread_level; }
}  // namespace detail

// ---- process management -----------------------------------------------------------------------

bool is_initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init != 0 && fin == 0;
}

namespace {
// init() and MpiContext(): MPI up (unless it is), with the timeout and the leave notices. `who` names
// the caller in the error; argc/argv may be null (MPI_Init_thread accepts that).
void init_mpi(const char* who, int* argc, char*** argv) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  XGRAD_CHECK(fin == 0, "{}: MPI was already finalised and cannot be initialised again", who);
  read_timeout_env();
  if (init == 0) {
    default_yield_when_idle();
    int provided = 0;
    detail::mpi(MPI_Init_thread, argc, argv, MPI_THREAD_SERIALIZED, &provided);
  }
  setup_leave_notices();
  install_sigterm_note();
}
}  // namespace

void init(int& argc, char**& argv) { init_mpi("distributed::init", &argc, &argv); }

void finalize() {
  if (!is_initialized()) return;
  detail::quiesce();
  leave();
  detail::mpi(MPI_Finalize);
}

void set_timeout(std::chrono::milliseconds timeout) {
  XGRAD_CHECK(timeout.count() > 0, "distributed::set_timeout: argument 'timeout' must be positive, got {} ms",
              timeout.count());
  wait_state().timeout = timeout;
}

std::chrono::milliseconds timeout() { return wait_state().timeout; }

void abort(int code) {
  if (is_initialized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

MpiContext::MpiContext(int& argc, char**& argv) : uncaught_at_start_(std::uncaught_exceptions()), owns_(false) {
  const bool was = is_initialized();
  init(argc, argv);
  owns_ = !was;
}

MpiContext::MpiContext() : uncaught_at_start_(std::uncaught_exceptions()), owns_(false) {
  const bool was = is_initialized();
  init_mpi("MpiContext", nullptr, nullptr);
  owns_ = !was;
}

MpiContext::~MpiContext() {
  if (!owns_) return;
  // Unwinding because of an exception: other ranks may be blocked in a collective that this rank
  // will never join, and MPI_Finalize would wait for them (Note [Collective errors and hangs]).
  if (std::uncaught_exceptions() > uncaught_at_start_) abort(1);
  finalize();
}

int rank() {
  detail::require_mpi("distributed::rank");
  int r = 0;
  detail::mpi(MPI_Comm_rank, MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  detail::require_mpi("distributed::world_size");
  int n = 0;
  detail::mpi(MPI_Comm_size, MPI_COMM_WORLD, &n);
  return n;
}

}  // namespace xgrad::distributed
