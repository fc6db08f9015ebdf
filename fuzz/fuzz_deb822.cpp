// libFuzzer harness for the deb822 package index reader (nn/datasets/debian_packages.hpp). Any input
// must either parse or throw xgrad::Error. A parsed index is written back in deb822 form and must
// parse to the same packages, and its dependency graph's edges must be unique, sorted, in range and
// free of self-loops.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "xgrad/core/error.hpp"
#include "xgrad/nn/datasets/debian_packages.hpp"

namespace ds = xgrad::nn::datasets;

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_deb822: %s\n", what);
  std::abort();
}

std::string relations(const std::vector<ds::RelationGroup>& groups) {
  std::string out;
  for (const auto& group : groups) {
    if (!out.empty()) out += ",\n ";  // a continuation line, as apt never writes but may read
    for (std::size_t a = 0; a < group.size(); ++a) {
      const auto& r = group[a];
      out += (a ? " | " : "") + r.name + (r.arch.empty() ? "" : ":" + r.arch);
      if (!r.op.empty()) out += " (" + r.op + " " + r.version + ")";
    }
  }
  return out;
}

std::string write_back(const std::vector<ds::DebianPackage>& packages) {
  std::string out;
  for (const auto& p : packages) {
    out += "Package: " + p.name + "\n";
    if (p.area != "main" || p.section.find('/') != std::string::npos)
      out += "Section: " + p.area + "/" + p.section + "\n";
    else if (!p.section.empty())
      out += "Section: " + p.section + "\n";
    if (!p.description.empty()) out += "Description: " + p.description + "\n long text\n";
    const std::pair<const char*, const std::vector<ds::RelationGroup>*> fields[] = {{"Depends", &p.depends},
                                                                                    {"Pre-Depends", &p.pre_depends},
                                                                                    {"Recommends", &p.recommends},
                                                                                    {"Suggests", &p.suggests}};
    for (const auto& f : fields)
      if (!f.second->empty()) out += std::string(f.first) + ": " + relations(*f.second) + "\n";
    out += "\n";
  }
  return out;
}

bool same(const ds::PackageRelation& a, const ds::PackageRelation& b) {
  return a.name == b.name && a.arch == b.arch && a.op == b.op && a.version == b.version;
}

bool same(const std::vector<ds::RelationGroup>& a, const std::vector<ds::RelationGroup>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t g = 0; g < a.size(); ++g) {
    if (a[g].size() != b[g].size()) return false;
    for (std::size_t r = 0; r < a[g].size(); ++r)
      if (!same(a[g][r], b[g][r])) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<ds::DebianPackage> packages;
  try {
    packages = ds::parse_debian_packages(text, "fuzz");
  } catch (const xgrad::Error&) {
    return 0;
  }
  std::vector<ds::DebianPackage> back;
  try {
    back = ds::parse_debian_packages(write_back(packages), "fuzz round trip");
  } catch (const xgrad::Error& e) {
    std::fprintf(stderr, "fuzz_deb822: a written index does not parse: %s\n", e.what());
    std::abort();
  }
  if (back.size() != packages.size()) fail("the round trip changed the number of packages");
  for (std::size_t i = 0; i < packages.size(); ++i) {
    const auto& a = packages[i];
    const auto& b = back[i];
    if (a.name != b.name || a.area != b.area || a.section != b.section || a.description != b.description)
      fail("the round trip changed a package's name, section or description");
    if (!same(a.depends, b.depends) || !same(a.pre_depends, b.pre_depends) || !same(a.recommends, b.recommends) ||
        !same(a.suggests, b.suggests))
      fail("the round trip changed a package's relations");
  }
  const ds::DependencyGraph g = ds::dependency_edges(packages);
  const auto n = static_cast<std::int64_t>(packages.size());
  if (g.src.size() != g.dst.size()) fail("src and dst differ in length");
  for (std::size_t e = 0; e < g.src.size(); ++e) {
    if (g.src[e] < 0 || g.src[e] >= n || g.dst[e] < 0 || g.dst[e] >= n) fail("an edge out of range");
    if (g.src[e] == g.dst[e]) fail("a self-loop");
    if (e > 0 && !(g.src[e - 1] < g.src[e] || (g.src[e - 1] == g.src[e] && g.dst[e - 1] < g.dst[e])))
      fail("edges not sorted and unique");
  }
  return 0;
}
