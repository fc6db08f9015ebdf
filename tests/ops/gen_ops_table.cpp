// Regenerates the op tables of docs/ops.md from the `/// @op` rows of ops/*.hpp (op_table_rows.hpp).
// Run through its target: `cmake --build build/release --target docs_ops_table`; by hand:
// xgrad_gen_ops_table <source folder>. The test "docs/ops.md: its op tables are the @op rows of
// ops/*.hpp" (test_op_table.cpp) fails until docs/ops.md is regenerated after a row changes.
#include <cstdio>
#include <exception>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "op_table_rows.hpp"

int main(int argc, char** argv) {
  using namespace xgrad::test;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <source folder>  (rewrites <source folder>/docs/ops.md)\n", argv[0]);
    return 2;
  }
  try {
    const std::string src = argv[1];
    const std::vector<OpRow> rows = read_op_rows(src + "/ops");
    const std::vector<std::string> problems = op_row_problems(rows);
    for (const auto& p : problems) std::fprintf(stderr, "%s\n", p.c_str());
    if (!problems.empty()) return 1;
    const std::string path = src + "/docs/ops.md";
    const std::string doc = read_text_file(path);
    const std::string updated = replace_op_tables(doc, op_tables_markdown(rows));
    std::set<std::string> headers;
    for (const auto& r : rows) headers.insert(r.header);
    if (updated == doc) {
      std::printf("docs/ops.md: op tables up to date (%zu rows from %zu headers)\n", rows.size(), headers.size());
      return 0;
    }
    std::ofstream out(path, std::ios::binary);
    out << updated;
    if (!out.flush()) throw std::runtime_error("cannot write " + path);
    std::printf("docs/ops.md: op tables regenerated (%zu rows from %zu headers)\n", rows.size(), headers.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
