#pragma once
// Shared by autograd_overhead.cpp (ours) and torch_autograd_overhead.cpp (the libtorch peer), so both
// sides parse the same options and time with the same code. Plain C++17: the peer is built with
// libtorch's flags and standard.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace overhead {

struct Options {
  int threads = 1;
  int iters = 20000;
  int mlp_iters = 2000;
  int reps = 7;
  std::string only;  // empty: every case
};

inline Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--threads"))
      o.threads = std::atoi(next());
    else if (!std::strcmp(argv[i], "--iters"))
      o.iters = std::atoi(next());
    else if (!std::strcmp(argv[i], "--mlp-iters"))
      o.mlp_iters = std::atoi(next());
    else if (!std::strcmp(argv[i], "--reps"))
      o.reps = std::atoi(next());
    else if (!std::strcmp(argv[i], "--case"))
      o.only = next();
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--iters N] [--mlp-iters N] [--reps N] [--case NAME]\n", argv[0]);
      std::exit(2);
    }
  }
  return o;
}

// Minor page faults per iteration of the last median_us call (mean over all timed iterations).
inline double last_minflt = 0;

inline long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// A field of /proc/self/status in kB ("VmRSS:", "VmHWM:": the resident set and its peak), -1 when
// the file or the field is missing: the benchmarks' memory figures.
inline long status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
  return -1;
}

// Runs body() iters times per repetition (after one short warm-up) and returns the median over
// repetitions of the time per iteration, in microseconds.
template <class Body>
double median_us(int iters, int reps, Body&& body) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < std::max(1, iters / 10); ++i) body();
  const long f0 = minor_faults();
  std::vector<double> per_iter;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) body();
    const std::chrono::duration<double, std::micro> dt = Clock::now() - t0;
    per_iter.push_back(dt.count() / iters);
  }
  last_minflt = static_cast<double>(minor_faults() - f0) / (static_cast<double>(iters) * reps);
  std::sort(per_iter.begin(), per_iter.end());
  return per_iter[per_iter.size() / 2];
}

// CSV rows `case,impl,threads,us,value` and `case,impl,threads,minflt,value` (of the last median_us).
inline void row(const char* name, const char* impl, int threads, double us) {
  std::printf("%s,%s,%d,us,%.3f\n", name, impl, threads, us);
  std::printf("%s,%s,%d,minflt,%.3f\n", name, impl, threads, last_minflt);
}

}  // namespace overhead
