// The `/// @op` rows of ops/*.hpp and the op tables of docs/ops.md generated from them. Standard
// library only: shared by the docs tests of test_op_table.cpp and by the generator gen_ops_table.cpp
// (`cmake --build build/release --target docs_ops_table`).
//
// A row states one op, or one family of ops that share their formulas, in four cells separated by
// " | ": op | forward | gradient | torch. It is the last part of the op's doc comment, directly
// above its declaration, and may continue over the following `///` lines (joined with spaces; a
// continuation line may start with "| " to put each cell on a line of its own). For a new op
// softsign:
//   /// @op `softsign(x)` | x/(1 + |x|) | g/(1 + |x|)² | torch.nn.functional.softsign
//   Tensor softsign(const Tensor& x);
// A '|' without a space on both sides is text (|x|). The op cell names the ops in backticks; the
// torch cell starts with the PyTorch function of the same semantics, or "—" for none, and the op
// table's parity check calls it, or the functions named after "compared through" in the cell.
#pragma once

#include <string>
#include <vector>

namespace xgrad::test {

/// One `/// @op` row of a header.
struct OpRow {
  std::string header;              // the header's stem: "activation"
  int line = 0;                    // 1-based line of "/// @op"
  std::vector<std::string> cells;  // op, forward, gradient, torch (trimmed; four when well formed)
  std::string next;                // the line after the row, its op's declaration (a template's two lines)
};

/// The rows of every ops_dir/*.hpp, by header name, then in file order.
std::vector<OpRow> read_op_rows(const std::string& ops_dir);

/// What is wrong with the rows' form ("ops/activation.hpp:37: ..."): not four cells, an empty
/// cell, a torch cell that starts with neither "—" nor "torch.". Empty when every row is well formed.
std::vector<std::string> op_row_problems(const std::vector<OpRow>& rows);

/// The generated part of docs/ops.md: one table per header, between the begin and end markers.
std::string op_tables_markdown(const std::vector<OpRow>& rows);

/// `doc` with its generated part (from the begin marker's line to the end marker's line) replaced by
/// `tables`; throws std::runtime_error when a marker is missing.
std::string replace_op_tables(const std::string& doc, const std::string& tables);

/// The command that regenerates docs/ops.md's op tables (for messages).
inline constexpr const char* kRegenerateOpTables = "cmake --build build/release --target docs_ops_table";

/// A file's whole text; throws std::runtime_error when it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace xgrad::test
