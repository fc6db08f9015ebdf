#include "support.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "../catch_impl.hpp"

#ifndef XGRAD_SOURCE_DIR
#error "XGRAD_SOURCE_DIR must be defined by the build"
#endif

namespace xgrad::test {

void require_gradcheck(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs,
                       const GradcheckOptions& options) {
  const GradcheckReport rep = gradcheck(fn, inputs, options);
  INFO(rep.message);
  REQUIRE(rep.ok);
}

void require_thread_deterministic(const std::function<Tensors()>& fn) {
  const Tensors one = with_num_threads(1, fn);
  const Tensors two = with_num_threads(2, fn);
  REQUIRE(one.size() == two.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    INFO("result " << i << " differs between 1 and 2 threads");
    REQUIRE(bit_equal(one[i], two[i]));
  }
}

void require_hostile_paths_refused(const std::string& dir, const std::string& fn,
                                   const std::function<void(const std::string&)>& load) {
  // Runs load(path) on a thread, so that a load blocking on a FIFO can be detected and unblocked.
  const auto run = [&](const std::string& path) {
    std::string message = "no exception";
    std::atomic<bool> finished{false};
    std::thread t([&] {
      try {
        load(path);
      } catch (const Error& e) {
        message = std::string("Error: ") + e.what();
      } catch (const std::exception& e) {
        message = std::string("not an xgrad::Error: ") + e.what();
      }
      finished = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!finished && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const bool blocked = !finished;
    if (blocked) {  // open (O_RDWR never blocks on Linux) and close the FIFO: the reader sees end of file
      const int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
    t.join();
    INFO("loading " << path);
    CHECK_FALSE(blocked);
    return message;
  };
  const auto expect = [&](const std::string& path, const std::vector<std::string>& fragments) {
    const std::string message = run(path);
    INFO("message: " << message);
    CHECK(message.rfind("Error: ", 0) == 0);
    CHECK(message.find(fn) != std::string::npos);
    CHECK(message.find(path) != std::string::npos);
    for (const auto& f : fragments) {
      INFO("expected to contain: " << f);
      CHECK(message.find(f) != std::string::npos);
    }
  };
  const std::string fifo = dir + "/fifo_without_writer";
  ::unlink(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  expect(fifo, {"not a regular file", "FIFO"});
  const std::string link = dir + "/link_to_fifo";
  ::unlink(link.c_str());
  REQUIRE(::symlink(fifo.c_str(), link.c_str()) == 0);
  expect(link, {"not a regular file", "FIFO"});
  expect(dir, {"not a regular file", "directory"});
  expect("/dev/null", {"not a regular file", "character device"});
  expect("/dev/zero", {"not a regular file", "character device"});
  expect(dir + "/no_such_file", {"cannot open", "No such file or directory"});
  const std::string plain = dir + "/plain_file";
  write_bytes(plain, "x");
  expect(plain + "/child", {"cannot open", "Not a directory"});
  const std::string loop = dir + "/link_loop";
  ::unlink(loop.c_str());
  REQUIRE(::symlink(loop.c_str(), loop.c_str()) == 0);
  expect(loop, {"cannot open", "Too many levels of symbolic links"});
  ::unlink(fifo.c_str());
  ::unlink(link.c_str());
  ::unlink(plain.c_str());
  ::unlink(loop.c_str());
}

void require_error(const std::function<void()>& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments) {
      INFO("message: " << msg);
      INFO("expected to contain: " << f);
      CHECK(msg.find(f) != std::string::npos);
    }
    return;
  }
  FAIL("expected xgrad::Error containing " << (fragments.empty() ? std::string() : fragments[0]));
}

void run_python_script(const std::string& script, const std::string& dir) {
  const std::string path = script.starts_with('/') ? script : std::string(XGRAD_SOURCE_DIR) + "/" + script;
  const std::string cmd = "/usr/bin/python3 " + path + " " + dir + " > " + dir + "/python.log 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(dir + "/python.log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    FAIL("python script failed (" << cmd << "):\n" << text);
  }
}

std::pair<double, double> max_error(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    err = std::max(err, std::abs(got[i] - want[i]));
  }
  return {err, scale};
}

Tensor randn_leaf(const Shape& shape, Generator& gen, Dtype dtype) {
  return Tensor::randn(shape, gen, dtype).set_requires_grad();
}

Tensor uniform_leaf(const Shape& shape, Generator& gen, double lo, double hi, Dtype dtype) {
  Tensor t = Tensor::rand(shape, gen, kFloat64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = lo + (hi - lo) * p[i];
  return t.to(dtype).set_requires_grad();
}

namespace {
// allclose, where NaN == NaN and inf == inf of the same sign when `nonfinite` is set. Two integer
// or bool results compare exactly, as int64 (through doubles, values beyond 2^53 would round).
bool close(const Tensor& got, const Tensor& want, double rtol, double atol, bool nonfinite) {
  if (!is_floating_point(got.dtype()) && !is_floating_point(want.dtype())) {
    if (got.shape() != want.shape()) return false;
    const Tensor a = got.to(kInt64), b = want.to(kInt64);
    return std::equal(a.data<std::int64_t>(), a.data<std::int64_t>() + a.numel(), b.data<std::int64_t>());
  }
  if (!nonfinite) return allclose(got, want, rtol, atol);
  if (got.shape() != want.shape()) return false;
  const auto a = got.to_vector(), b = want.to_vector();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::isinf(a[i]) && a[i] == b[i]) continue;
    if (!(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(b[i]))) return false;
  }
  return true;
}
}  // namespace

ParityBatch::ParityBatch(std::string suite) : suite_(std::move(suite)) {
  const auto base =
      std::filesystem::temp_directory_path() / ("xgrad_parity_" + suite_ + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  dir_ = base.string();
}

void ParityBatch::add(const std::string& case_name, const std::string& torch_code, const std::vector<Input>& inputs,
                      const std::function<Tensor(const Tensors&)>& ours, double rtol, double atol) {
  Case c;
  c.name = case_name;
  c.code = torch_code;
  for (const auto& in : inputs) {
    Input copy{in.name, in.value.detach().clone_data(), in.requires_grad};
    if (copy.requires_grad) copy.value.set_requires_grad();
    c.inputs.push_back(copy);
  }
  Tensors args;
  for (const auto& in : c.inputs) args.push_back(in.value);
  c.out = ours(args);
  const Dtype dt = c.out.dtype();
  c.rtol = rtol >= 0 ? rtol : (dt == kFloat32 ? 1e-4 : 1e-10);
  c.atol = atol >= 0 ? atol : (dt == kFloat32 ? 1e-5 : 1e-12);
  const std::string prefix = dir_ + "/" + c.name;
  if (c.out.requires_grad()) {
    Generator gen(1234 + cases_.size());
    Tensor seed = Tensor::randn(c.out.shape(), gen, dt);
    save_npy(prefix + "__seed.npy", seed);
    c.out.backward(seed);
    for (const auto& in : c.inputs) c.grads.push_back(in.requires_grad ? in.value.grad() : Tensor());
  }
  for (const auto& in : c.inputs) save_npy(prefix + "__in_" + in.name + ".npy", in.value.detach());
  cases_.push_back(std::move(c));
}

void ParityBatch::run() {
  nlohmann::json manifest = nlohmann::json::array();
  for (const auto& c : cases_) {
    nlohmann::json jc;
    jc["name"] = c.name;
    jc["code"] = c.code;
    jc["backward"] = c.out.requires_grad();
    for (const auto& in : c.inputs) jc["inputs"].push_back({{"name", in.name}, {"requires_grad", in.requires_grad}});
    manifest.push_back(jc);
  }
  {
    std::ofstream f(dir_ + "/manifest.json");
    f << manifest.dump(1);
  }
  run_python_script("tests/support/torch_parity.py", dir_);
  for (const auto& c : cases_) {
    const std::string prefix = dir_ + "/" + c.name;
    const Tensor ref = load_npy(prefix + "__torch_out.npy");
    INFO("parity case '" << suite_ << "/" << c.name << "' (" << dtype_name(c.out.dtype()) << "), torch: " << c.code);
    CHECK(ref.shape() == c.out.shape());
    if (ref.shape() != c.out.shape()) continue;  // one wrong case must not hide the others
    {
      INFO("output: ours " << c.out << "\n torch " << ref);
      CHECK(close(c.out.detach(), ref, c.rtol, c.atol, equal_nonfinite_));
    }
    for (std::size_t i = 0; i < c.grads.size(); ++i) {
      if (!c.inputs[i].requires_grad) continue;
      const std::string f = prefix + "__torch_grad_" + c.inputs[i].name + ".npy";
      const bool torch_has = std::filesystem::exists(f);
      INFO("gradient of '" << c.inputs[i].name << "'");
      if (!torch_has) {
        // torch returned None (input unused): ours must be undefined or all zero.
        if (c.grads[i].defined())
          CHECK(allclose(c.grads[i], Tensor::zeros(c.grads[i].shape(), c.grads[i].dtype()), 0, 0));
        continue;
      }
      const Tensor gref = load_npy(f);
      REQUIRE(c.grads[i].defined());
      INFO("ours " << c.grads[i] << "\n torch " << gref);
      CHECK(close(c.grads[i], gref, c.rtol, c.atol, equal_nonfinite_));
    }
  }
  std::filesystem::remove_all(dir_);
}

TempDir::TempDir(const std::string& tag) {
  path = std::filesystem::temp_directory_path() / ("xgrad_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
}
TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}
std::string TempDir::file(const std::string& name) const { return (path / name).string(); }
std::vector<std::string> TempDir::entries() const {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace xgrad::test

// The runner of the test programs: Catch2's default main (Catch2's implementation is compiled once,
// in tests/catch_impl.cpp; the MPI test has its own main).
int main(int argc, char* argv[]) { return xgrad::test::run_catch_session(argc, argv); }
