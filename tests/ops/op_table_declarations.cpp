// The op table's completeness check: the public op declarations of ops/*.hpp, parsed (op_table.hpp).
// Apart from the entries (op_table.cpp) so that its <regex> is compiled once, here.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "op_table.hpp"

namespace xgrad::test {

// ---- the completeness check's parser --------------------------------------------------------------

namespace {
std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\n");
  const auto e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// "const std::vector<std::int64_t>& axes = {}" -> "vector<int64_t>"
std::string param_type(std::string p) {
  // drop the default value (a top-level '=')
  int depth = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '<' || p[i] == '(' || p[i] == '{') ++depth;
    if (p[i] == '>' || p[i] == ')' || p[i] == '}') --depth;
    if (p[i] == '=' && depth == 0) {
      p = p.substr(0, i);
      break;
    }
  }
  p = std::regex_replace(p, std::regex("std::"), "");
  p = std::regex_replace(p, std::regex("\\bconst\\b"), "");
  p = std::regex_replace(p, std::regex("[&*]"), " ");
  p = trim(p);
  // drop the parameter name: the last identifier, when something precedes it
  const std::regex name_re("^(.*[^A-Za-z0-9_:])\\s*[A-Za-z_][A-Za-z0-9_]*$");
  std::smatch m;
  if (std::regex_match(p, m, name_re)) p = trim(m[1].str());
  return std::regex_replace(p, std::regex("\\s+"), "");
}
}  // namespace

std::vector<std::string> public_op_signatures(const std::string& ops_dir) {
  std::vector<std::string> out;
  for (const auto& d : public_op_declarations(ops_dir)) out.push_back(d.signature);
  return out;
}

std::vector<OpDeclaration> public_op_declarations(const std::string& ops_dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(ops_dir))
    if (e.path().extension() == ".hpp") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<OpDeclaration> out;
  const std::regex decl_re(
      "^(Tensor|Tensors|std::tuple<Tensor, Tensor>|SparseCsr) (operator\\S+|[A-Za-z_][A-Za-z0-9_]*)\\(");
  for (const auto& file : files) {
    std::ifstream in(file);
    std::string line;
    std::vector<std::string> lines;
    while (std::getline(in, line)) lines.push_back(line);
    int detail_depth = 0;  // > 0 inside namespace detail
    int brace = 0;         // braces opened inside namespace detail
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string& l = lines[i];
      if (detail_depth == 0 && std::regex_search(l, std::regex("^namespace (\\w+::)*detail(::\\w+)* \\{"))) {
        detail_depth = 1;
        brace = 1;
        continue;
      }
      if (detail_depth > 0) {
        for (char c : l) brace += c == '{' ? 1 : c == '}' ? -1 : 0;
        if (brace <= 0) detail_depth = 0;
        continue;
      }
      std::smatch m;
      if (!std::regex_search(l, m, decl_re)) continue;  // class members are indented; inline aliases skipped
      // gather the parameter list up to the matching ')'
      std::string text = l.substr(static_cast<std::size_t>(m.position(0) + m.length(0)));
      std::size_t j = i;
      int depth = 1;
      std::string params;
      for (;;) {
        for (char c : text) {
          if (c == '(') ++depth;
          if (c == ')' && --depth == 0) break;
          params += c;
        }
        if (depth == 0 || ++j >= lines.size()) break;
        text = " " + lines[j];
      }
      std::vector<std::string> types;
      int d = 0;
      std::string cur;
      for (char c : params) {
        if (c == '<' || c == '(' || c == '{') ++d;
        if (c == '>' || c == ')' || c == '}') --d;
        if (c == ',' && d == 0) {
          types.push_back(param_type(cur));
          cur.clear();
        } else {
          cur += c;
        }
      }
      if (!trim(cur).empty()) types.push_back(param_type(cur));
      out.push_back(
          {std::filesystem::path(file).stem().string(), fmt::format("{}({})", m[2].str(), fmt::join(types, ","))});
    }
  }
  return out;
}

}  // namespace xgrad::test
