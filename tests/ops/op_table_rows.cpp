// The `/// @op` rows of ops/*.hpp and docs/ops.md's op tables (op_table_rows.hpp).
#include "op_table_rows.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace xgrad::test {

namespace {

constexpr const char* kTag = "/// @op ";
constexpr const char* kBegin = "<!-- op tables begin";
constexpr const char* kEnd = "<!-- op tables end -->";

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// "a | b | c" -> {"a", "b", "c"}: split at " | " only, so |x| stays text.
std::vector<std::string> split_cells(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t sep = text.find(" | ", at);
    out.push_back(trim(text.substr(at, sep == std::string::npos ? std::string::npos : sep - at)));
    if (sep == std::string::npos) return out;
    at = sep + 3;
  }
}

// A cell as Markdown table text: the '|' it holds escaped.
std::string md_cell(const std::string& cell) {
  std::string out;
  for (char c : cell) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<OpRow> read_op_rows(const std::string& ops_dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(ops_dir))
    if (e.path().extension() == ".hpp") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<OpRow> rows;
  for (const auto& file : files) {
    std::vector<std::string> lines;
    std::istringstream in(read_text_file(file.string()));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (!starts_with(lines[i], kTag)) continue;
      OpRow row;
      row.header = file.stem().string();
      row.line = static_cast<int>(i) + 1;
      std::string text = lines[i].substr(std::string(kTag).size());
      // continuation lines: every following `///` line (a new row or a blank `///` ends it)
      while (i + 1 < lines.size() && starts_with(lines[i + 1], "///") && !starts_with(lines[i + 1], kTag) &&
             !trim(lines[i + 1].substr(3)).empty())
        text += " " + trim(lines[++i].substr(3));
      row.cells = split_cells(trim(text));
      if (i + 1 < lines.size()) row.next = lines[i + 1];
      if (starts_with(row.next, "template") && i + 2 < lines.size()) row.next += " " + lines[i + 2];
      rows.push_back(row);
    }
  }
  return rows;
}

std::vector<std::string> op_row_problems(const std::vector<OpRow>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows) {
    const std::string where = "ops/" + r.header + ".hpp:" + std::to_string(r.line) + ": ";
    if (r.cells.size() != 4) {
      out.push_back(where + "an @op row has 4 cells (op | forward | gradient | torch), this one " +
                    std::to_string(r.cells.size()));
      continue;
    }
    for (const auto& c : r.cells)
      if (c.empty()) out.push_back(where + "an empty cell");
    if (!starts_with(r.cells[3], "—") && !starts_with(r.cells[3], "torch."))
      out.push_back(where + "the torch cell starts with a torch function or \"—\" (none), not \"" + r.cells[3] + "\"");
  }
  return out;
}

std::string op_tables_markdown(const std::vector<OpRow>& rows) {
  std::string out = kBegin;  // appended piece by piece: GCC 12's -Warray-bounds misfires on a + chain
  out += ": generated from the `/// @op` rows of ops/*.hpp by `";
  out += kRegenerateOpTables;
  out += "`; edit the rows, not these tables -->\n";
  std::string header;
  for (const auto& r : rows) {
    if (r.header != header) {
      header = r.header;
      out += "\n### [ops/" + header + ".hpp](../ops/" + header + ".hpp)\n\n";
      out += "| op | forward | gradient | torch |\n|---|---|---|---|\n";
    }
    out += "|";
    for (const auto& c : r.cells) out += " " + md_cell(c) + " |";
    out += "\n";
  }
  return out + "\n" + kEnd + "\n";
}

std::string replace_op_tables(const std::string& doc, const std::string& tables) {
  const std::size_t begin = doc.find(kBegin);
  const std::size_t end = doc.find(kEnd);
  if (begin == std::string::npos || end == std::string::npos || end < begin || (begin > 0 && doc[begin - 1] != '\n'))
    throw std::runtime_error(std::string("docs/ops.md has no line starting with \"") + kBegin +
                             "\" followed by a line \"" + kEnd + "\" around its op tables");
  std::size_t after = doc.find('\n', end);
  after = after == std::string::npos ? doc.size() : after + 1;
  return doc.substr(0, begin) + tables + doc.substr(after);
}

}  // namespace xgrad::test
