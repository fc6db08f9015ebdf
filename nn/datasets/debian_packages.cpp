#include "xgrad/nn/datasets/debian_packages.hpp"

#include <fmt/core.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "xgrad/core/error.hpp"

namespace xgrad::nn::datasets {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool is_name_char(char c) { return is_alnum(c) || c == '+' || c == '-' || c == '.' || c == '_'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

/// At most 80 characters of a value for a message (hostile input can be megabytes long), printable.
std::string excerpt(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) out.push_back(static_cast<unsigned char>(c) < 0x20 ? '?' : c);
  if (s.size() > 80) out += "...";
  return out;
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

/// A package name: letters, digits and +-._, starting with a letter or digit.
bool valid_name(std::string_view s) {
  if (s.empty() || !is_alnum(s.front())) return false;
  return std::all_of(s.begin(), s.end(), is_name_char);
}

}  // namespace

std::vector<RelationGroup> parse_relations(std::string_view value, const char* field, std::int64_t line,
                                           const char* fn) {
  std::vector<RelationGroup> groups;
  const std::size_t n = value.size();
  std::size_t i = 0;
  auto fail = [&](const std::string& what) {
    throw Error(
        fmt::format("{}: line {}: field {}: {} at character {} of '{}'", fn, line, field, what, i + 1, excerpt(value)));
  };
  auto skip_space = [&] {
    while (i < n && is_space(value[i])) ++i;
  };
  skip_space();
  if (i == n) return groups;  // an empty field: no relation
  while (true) {
    RelationGroup group;
    while (true) {
      skip_space();
      PackageRelation rel;
      const std::size_t start = i;
      while (i < n && is_name_char(value[i])) ++i;
      if (i == start) {
        if (i == n || value[i] == ',' || value[i] == '|')
          fail(group.empty() ? "an empty relation (nothing between commas)" : "an empty alternative after '|'");
        fail(fmt::format("unexpected character '{}' where a package name starts", excerpt(value.substr(i, 1))));
      }
      rel.name = std::string(value.substr(start, i - start));
      if (!is_alnum(rel.name.front()))
        fail(fmt::format("package name '{}' does not start with a letter or digit", rel.name));
      if (i < n && value[i] == ':') {
        const std::size_t a = ++i;
        while (i < n && (is_alnum(value[i]) || value[i] == '-')) ++i;
        if (i == a) fail(fmt::format("an empty architecture qualifier after '{}:'", rel.name));
        rel.arch = std::string(value.substr(a, i - a));
      }
      skip_space();
      if (i < n && value[i] == '(') {
        const std::size_t open = i++;
        skip_space();
        const std::size_t o = i;
        while (i < n && (value[i] == '<' || value[i] == '>' || value[i] == '=')) ++i;
        rel.op = std::string(value.substr(o, i - o));
        static constexpr std::array<std::string_view, 7> kOps = {"<<", "<=", "=", ">=", ">>", "<", ">"};
        if (rel.op.empty()) fail(fmt::format("no version operator after '(' of '{}'", rel.name));
        if (std::find(kOps.begin(), kOps.end(), rel.op) == kOps.end())
          fail(fmt::format("unknown version operator '{}'", rel.op));
        skip_space();
        const std::size_t v = i;
        while (i < n && !is_space(value[i]) && value[i] != ')' && value[i] != '(') ++i;
        if (i == v) fail(fmt::format("no version after '{}' of '{}'", rel.op, rel.name));
        rel.version = std::string(value.substr(v, i - v));
        skip_space();
        if (i >= n || value[i] != ')') {
          i = open;
          fail(fmt::format("'(' of '{}' without a closing ')'", rel.name));
        }
        ++i;
        skip_space();
      }
      // Architecture restrictions [amd64 !i386] and build profiles <!nocheck>: checked, dropped.
      while (i < n && (value[i] == '[' || value[i] == '<')) {
        const char close = value[i] == '[' ? ']' : '>';
        const std::size_t end = value.find(close, i + 1);
        if (end == std::string_view::npos) fail(fmt::format("'{}' without a closing '{}'", value[i], close));
        i = end + 1;
        skip_space();
      }
      group.push_back(std::move(rel));
      if (i < n && value[i] == '|') {
        ++i;
        continue;
      }
      break;
    }
    groups.push_back(std::move(group));
    if (i == n) return groups;
    if (value[i] != ',') fail(fmt::format("unexpected '{}' after a relation", excerpt(value.substr(i, 1))));
    ++i;
  }
}

std::vector<DebianPackage> parse_debian_packages(std::string_view text, const std::string& source) {
  constexpr const char* kFn = "parse_debian_packages";
  // The fields kept; a continuation of any other field is skipped.
  enum Kept { kPackage, kSection, kDescription, kDepends, kPreDepends, kRecommends, kSuggests, kOther, kNone };
  static constexpr std::array<std::string_view, 7> kNames = {"package",     "section",    "description", "depends",
                                                             "pre-depends", "recommends", "suggests"};
  std::vector<DebianPackage> packages;
  std::array<std::string, 7> value;
  std::array<std::int64_t, 7> value_line{};
  std::array<bool, 7> present{};
  std::unordered_set<std::string> seen;  // the paragraph's field names, lowercase
  std::int64_t start_line = 0;           // 0: between paragraphs
  Kept last = kNone;
  std::int64_t line_no = 0;

  auto fail = [&](std::int64_t line, const std::string& what) {
    throw Error(fmt::format("{}: {}: line {}: {}", kFn, source, line, what));
  };
  auto finish = [&] {
    if (start_line == 0) return;
    if (!present[kPackage]) fail(start_line, "the paragraph starting here has no Package field");
    DebianPackage p;
    p.line = start_line;
    p.name = std::string(trim(value[kPackage]));
    if (!valid_name(p.name))
      fail(value_line[kPackage],
           fmt::format("Package '{}' is not a package name (letters, digits and +-._, starting with a letter or digit)",
                       excerpt(p.name)));
    if (present[kSection]) {
      const std::string_view s = trim(value[kSection]);
      const std::size_t slash = s.find('/');
      if (slash == std::string_view::npos) {
        p.section = std::string(s);
      } else {
        p.area = std::string(s.substr(0, slash));
        p.section = std::string(s.substr(slash + 1));
      }
    }
    if (present[kDescription]) p.description = std::string(trim(value[kDescription]));
    std::vector<RelationGroup>* targets[] = {&p.depends, &p.pre_depends, &p.recommends, &p.suggests};
    for (int f = kDepends; f <= kSuggests; ++f)
      if (present[static_cast<std::size_t>(f)]) {
        const auto k = static_cast<std::size_t>(f);
        static constexpr std::array<const char*, 4> kFieldNames = {"Depends", "Pre-Depends", "Recommends", "Suggests"};
        *targets[f - kDepends] =
            parse_relations(value[k], kFieldNames[static_cast<std::size_t>(f - kDepends)], value_line[k], kFn);
      }
    packages.push_back(std::move(p));
    for (auto& v : value) v.clear();
    present.fill(false);
    seen.clear();
    start_line = 0;
    last = kNone;
  };

  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (std::all_of(line.begin(), line.end(), is_blank)) {
      finish();
      continue;
    }
    if (is_blank(line.front())) {
      if (last == kNone) fail(line_no, "a continuation line (starting with a space or tab) before any field");
      if (last == kPackage || last == kSection)
        fail(line_no, fmt::format("the {} field continues on a second line (it is a one-line field)",
                                  last == kPackage ? "Package" : "Section"));
      if (last >= kDepends && last <= kSuggests) {
        value[last] += ' ';
        value[last] += line;
      }
      continue;
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      fail(line_no, fmt::format("no ':' in '{}' (a field line is 'Field: value'; a continuation line starts with a "
                                "space or tab)",
                                excerpt(line)));
    const std::string_view name = line.substr(0, colon);
    if (name.empty()) fail(line_no, "an empty field name before ':'");
    for (char c : name)
      if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f)
        fail(line_no, fmt::format("field name '{}' holds a space or control character", excerpt(name)));
    if (start_line == 0) start_line = line_no;
    std::string key = lowercase(name);
    const auto known = std::find(kNames.begin(), kNames.end(), key);
    if (!seen.insert(std::move(key)).second)
      fail(line_no,
           fmt::format("field '{}' appears twice in the paragraph starting at line {}", excerpt(name), start_line));
    if (known == kNames.end()) {
      last = kOther;
      continue;
    }
    last = static_cast<Kept>(known - kNames.begin());
    present[last] = true;
    value_line[last] = line_no;
    value[last] = std::string(line.substr(colon + 1));
  }
  finish();
  return packages;
}

std::vector<DebianPackage> read_apt_packages(const std::string& command) {
  constexpr const char* kFn = "read_apt_packages";
  constexpr std::size_t kMaxBytes = std::size_t{1} << 32;  // 4 GiB; Debian 12's full index is about 50 MB
  std::fflush(nullptr);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw Error(fmt::format("{}: cannot run '{}': {}", kFn, command, std::strerror(errno)));
  std::string text;
  std::vector<char> buffer(std::size_t{1} << 20);
  std::size_t got = 0;
  bool too_big = false;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    if (text.size() + got > kMaxBytes) {
      too_big = true;
      break;
    }
    text.append(buffer.data(), got);
  }
  const int status = ::pclose(pipe);
  if (too_big) throw Error(fmt::format("{}: '{}' printed more than {} bytes", kFn, command, kMaxBytes));
  if (status == -1) throw Error(fmt::format("{}: waiting for '{}' failed: {}", kFn, command, std::strerror(errno)));
  if (!WIFEXITED(status))
    throw Error(
        fmt::format("{}: '{}' was killed by signal {}", kFn, command, WIFSIGNALED(status) ? WTERMSIG(status) : 0));
  if (WEXITSTATUS(status) != 0)
    throw Error(fmt::format("{}: '{}' failed with exit status {}{}", kFn, command, WEXITSTATUS(status),
                            WEXITSTATUS(status) == 127 ? " (command not found)" : ""));
  if (trim(text).empty())
    throw Error(
        fmt::format("{}: '{}' printed nothing: apt's package index is empty (/var/lib/apt/lists holds no "
                    "Packages files, as in a fresh container); download it with `apt-get update` as root "
                    "(`sudo apt-get update`)",
                    kFn, command));
  return parse_debian_packages(text, "output of '" + command + "'");
}

DependencyGraph dependency_edges(const std::vector<DebianPackage>& packages) {
  DependencyGraph g;
  std::unordered_map<std::string_view, std::int64_t> index;
  index.reserve(packages.size());
  for (std::size_t i = 0; i < packages.size(); ++i)
    if (!index.emplace(packages[i].name, static_cast<std::int64_t>(i)).second) ++g.duplicate_names;
  std::vector<std::pair<std::int64_t, std::int64_t>> edges;
  for (std::size_t i = 0; i < packages.size(); ++i) {
    const auto& p = packages[i];
    for (const auto* field : {&p.depends, &p.pre_depends, &p.recommends, &p.suggests})
      for (const auto& group : *field)
        for (const auto& rel : group) {
          const auto it = index.find(rel.name);
          if (it == index.end()) {
            ++g.unresolved;
          } else if (it->second != static_cast<std::int64_t>(i)) {
            edges.emplace_back(static_cast<std::int64_t>(i), it->second);
          }
        }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  g.src.reserve(edges.size());
  g.dst.reserve(edges.size());
  for (const auto& [s, d] : edges) {
    g.src.push_back(s);
    g.dst.push_back(d);
  }
  return g;
}

}  // namespace xgrad::nn::datasets
