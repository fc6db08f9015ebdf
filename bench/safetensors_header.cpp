// safetensors header benchmark (the contract: "a header at the cap is parsed or refused in about the
// time it takes to read it"). Writes safetensors files whose headers are close to the 100 MB cap,
// then times, median of --reps runs each:
//   read     read_regular_file(path): the bytes from the (cached) file into memory
//   load     load_safetensors(path): read + scan the header + check + build the tensors
//   parse    parse_safetensors(bytes): the same from memory (no read)
//   scan     the header scanner alone (nn/detail/safetensors_header.hpp)
//   tensors  what any loader that returns tensors pays beyond the scan: building as many named
//            tensors as the file holds (Tensor::empty of shape [1], a memcpy of its 4 bytes, its name
//            as a std::string, into an nn::NamedTensors), then freeing them. No file is involved;
//            `parse` is about `scan` + `tensors` (entries case only)
// and prints `case,impl,threads,metric,value` rows: `<step>_cpu_ms` (median CPU time),
// `<step>_wall_ms` (median wall time) and `<step>_over_read`, the ratio of a step's median CPU time
// to the read's (the issue's target: parse / read about 2 or less).
//
// Cases (--case NAME runs one):
//   entries          ~950k entries "model.layers.<i>.mlp.weight_<j>" of dtype F32 and shape [1]
//   entries_refused  the same with a duplicate of the first name appended: refused at the end
//   metadata         ~4.5M short "__metadata__" keys (every key checked for duplicates)
//
// usage: safetensors_header_bench [--reps N] [--mb M] [--case NAME] [--step NAME] [--dir D]
#include "xgrad/nn/detail/safetensors_header.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "xgrad/core/error.hpp"
#include "xgrad/core/file_io.hpp"
#include "xgrad/nn/serialize.hpp"

namespace {

using namespace xgrad;
using Clock = std::chrono::steady_clock;

int g_reps = 5;
double g_mb = 96;  // header size in MB (the cap is 100 MB)
std::string g_only;
std::string g_step;  // --step: only this step (and the read, for the ratio)

void row(const std::string& c, const std::string& metric, double v) {
  std::printf("%s,xgrad,1,%s,%.6g\n", c.c_str(), metric.c_str(), v);
  std::fflush(stdout);
}

// Median over --reps runs of fn's CPU time (user + system, this process; the benchmark is
// single-threaded) in ms; g_last_wall_ms gets the median wall time. CPU time is what the ratios use:
// on a machine shared with other work, wall time also counts the waits for a core.
double g_last_wall_ms = 0;

double cpu_now_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double median_ms(const std::function<void()>& fn) {
  std::vector<double> cpu, wall;
  for (int r = 0; r < g_reps; ++r) {
    const auto t0 = Clock::now();
    const double c0 = cpu_now_ms();
    fn();
    cpu.push_back(cpu_now_ms() - c0);
    wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(wall.begin(), wall.end());
  g_last_wall_ms = wall[wall.size() / 2];
  return cpu[cpu.size() / 2];
}

std::string u64_le(std::uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out;
}

struct File {
  std::string bytes;
  bool refused = false;
  std::size_t tensors = 0;  // entries the file holds (tensors a load builds)
};

File entries_file(bool duplicate) {
  const std::size_t target = static_cast<std::size_t>(g_mb * 1e6);
  std::string h = "{";
  std::uint64_t off = 0;
  std::size_t n = 0;
  char buf[160];
  while (h.size() < target) {
    const int len = std::snprintf(buf, sizeof buf,
                                  "%s\"model.layers.%zu.mlp.weight_%zu\":{\"dtype\":\"F32\",\"shape\":[1],"
                                  "\"data_offsets\":[%llu,%llu]}",
                                  n ? "," : "", n / 16, n % 16, static_cast<unsigned long long>(off),
                                  static_cast<unsigned long long>(off + 4));
    h.append(buf, static_cast<std::size_t>(len));
    off += 4;
    ++n;
  }
  if (duplicate) h += R"(,"model.layers.0.mlp.weight_0":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  File f;
  f.bytes = u64_le(h.size()) + h + std::string(off, '\0');
  f.refused = duplicate;
  f.tensors = n;
  return f;
}

File metadata_file() {
  const std::size_t target = static_cast<std::size_t>(g_mb * 1e6);
  std::string h = R"({"__metadata__":{)";
  char buf[64];
  for (std::size_t n = 0; h.size() < target; ++n) {
    const int len = std::snprintf(buf, sizeof buf, "%s\"k%zu\":\"v\"", n ? "," : "", n);
    h.append(buf, static_cast<std::size_t>(len));
  }
  h += "}}";
  h.append((8 - h.size() % 8) % 8, ' ');
  File f;
  f.bytes = u64_le(h.size()) + h;
  return f;
}

void run_case(const std::string& name, const File& f, const std::string& dir) {
  if (!g_only.empty() && g_only != name) return;
  const std::string path = dir + "/" + name + ".safetensors";
  write_file_atomic(path, f.bytes, "safetensors_header_bench");
  std::uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<std::uint64_t>(static_cast<unsigned char>(f.bytes[i])) << (8 * i);
  row(name, "header_bytes", static_cast<double>(hlen));

  // Each step must do what the case says (load or refuse); a surprise stops the benchmark.
  auto expect = [&](const std::function<void()>& fn) {
    return [&f, fn] {
      try {
        fn();
      } catch (const Error& e) {
        if (!f.refused) {
          std::fprintf(stderr, "unexpected refusal: %.300s\n", e.what());
          std::exit(1);
        }
        return;
      }
      if (f.refused) {
        std::fprintf(stderr, "the case should have been refused\n");
        std::exit(1);
      }
    };
  };
  struct Step {
    const char* name;
    std::function<void()> fn;
  };
  // The tensors a load of this file returns, built and freed without the file (same names, shapes
  // and bytes as the entries case): the cost of the result itself.
  const auto build_tensors = [&f] {
    nn::NamedTensors out;
    out.reserve(f.tensors);
    const char zeros[4] = {};
    char nm[64];
    for (std::size_t n = 0; n < f.tensors; ++n) {
      const int len = std::snprintf(nm, sizeof nm, "model.layers.%zu.mlp.weight_%zu", n / 16, n % 16);
      Tensor t = Tensor::empty({1}, kFloat32);
      std::memcpy(t.raw_data(), zeros, sizeof zeros);
      out.emplace_back(std::string(nm, static_cast<std::size_t>(len)), std::move(t));
    }
  };
  const Step steps[] = {
      {"read", [&] { (void)read_regular_file(path, "bench"); }},
      {"load", expect([&] { (void)nn::load_safetensors(path); })},
      {"parse", expect([&] { (void)nn::parse_safetensors(f.bytes, path); })},
      {"scan", expect([&] { (void)detail::scan_safetensors_header(std::string_view(f.bytes).substr(8, hlen), path); })},
      {"tensors", build_tensors},
  };
  double read = 0;
  for (const Step& s : steps) {
    if (s.name == std::string("tensors") && (f.tensors == 0 || f.refused)) continue;
    if (!g_step.empty() && g_step != s.name && std::string(s.name) != "read") continue;
    const double ms = median_ms(s.fn);
    if (read == 0) read = ms;
    row(name, std::string(s.name) + "_cpu_ms", ms);
    row(name, std::string(s.name) + "_wall_ms", g_last_wall_ms);
    if (s.name != std::string("read")) row(name, std::string(s.name) + "_over_read", ms / read);
  }
  std::filesystem::remove(path);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--reps") {
      g_reps = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--mb") {
      g_mb = std::atof(next().c_str());
    } else if (a == "--case") {
      g_only = next();
    } else if (a == "--step") {
      g_step = next();
    } else if (a == "--dir") {
      dir = next();
    } else {
      std::fprintf(stderr,
                   "usage: %s [--reps N] [--mb M] [--case entries|entries_refused|metadata]\n  [--step "
                   "read|load|parse|scan|tensors] [--dir D]\n",
                   argv[0]);
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (!(g_mb > 0 && g_mb <= 99)) {
    std::fprintf(stderr, "--mb must be in (0, 99] (the header cap is 100 MB), got %g\n", g_mb);
    return 2;
  }
  std::printf("case,impl,threads,metric,value\n");
  run_case("entries", entries_file(false), dir);
  run_case("entries_refused", entries_file(true), dir);
  run_case("metadata", metadata_file(), dir);
  return 0;
}
