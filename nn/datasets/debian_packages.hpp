#pragma once
// The Debian package index as a dataset: the packages apt knows (`apt-cache dumpavail`, the
// "Packages" files under /var/lib/apt/lists that `apt-get update` downloads), each with its name,
// Section, one-line description and dependency relations, and the depends-on graph between them.
// examples/package_graph predicts a package's Section from the words of its description and this
// graph.
//
//   const auto packages = nn::datasets::read_apt_packages();          // runs apt-cache dumpavail
//   const auto graph = nn::datasets::dependency_edges(packages);      // (package, dependency) pairs
//
// Note [deb822 parsing]: the index is in deb822 form (Debian Policy 5.1): paragraphs ("stanzas")
// separated by blank lines (lines that are empty or hold only spaces and tabs), each a sequence of
// `Field: value` lines; a line starting with a space or tab continues the previous field's value.
// parse_debian_packages reads the text in one pass, line by line, and keeps only the fields it
// returns (Package, Section, Description, Depends, Pre-Depends, Recommends, Suggests), so its time
// and memory are linear in the input whatever the input holds. It refuses, with an xgrad::Error
// naming the function, the line number and what is wrong:
//   - a line that is neither blank, nor a continuation, nor has a ':' after a non-empty field name;
//   - a field name holding a space, tab or control character;
//   - a continuation line with no field before it in its paragraph;
//   - the same field twice in a paragraph (field names compare case-insensitively, as in deb822);
//   - a paragraph without a Package field, or with an empty one;
//   - a relation field that is not well formed (parse_relations).
// Lines may end in "\r\n". The last paragraph needs no blank line after it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xgrad::nn::datasets {

/// One alternative of a relation: `name[:arch] [(op version)] [[archs]] [<profiles>]`. The
/// architecture list and build profiles (source packages' syntax) are checked and dropped.
struct PackageRelation {
  std::string name;
  std::string arch;     // the qualifier after ':' ("any", "native", "amd64"); empty when none
  std::string op;       // "<<", "<=", "=", ">=", ">>" (or the obsolete "<", ">"); empty when none
  std::string version;  // the version after op; empty when none
};

/// One comma-separated entry of a relation field: its alternatives (`a | b (>= 1)`), at least one.
using RelationGroup = std::vector<PackageRelation>;

/// One paragraph of the index.
struct DebianPackage {
  std::string name;
  /// The archive area: the part of Section before a '/' ("contrib", "non-free",
  /// "non-free-firmware"); "main" when Section has no '/'.
  std::string area = "main";
  /// Section without its area prefix ("net" for "contrib/net"); empty when the paragraph has none.
  std::string section;
  /// The first line of Description (the short description); empty when there is none.
  std::string description;
  std::vector<RelationGroup> depends, pre_depends, recommends, suggests;
  /// The line number (from 1) of the paragraph's first line.
  std::int64_t line = 0;
};

/// Parses a relation field's value (Depends, Recommends, ...): comma-separated groups of
/// alternatives separated by '|'. Continuation lines (already joined, any whitespace) are allowed.
/// Errors (xgrad::Error naming `fn`, the field, `line` and the text): an empty group or alternative,
/// a name not of the letters, digits and `+-._` starting with a letter or digit, an empty
/// architecture qualifier, a '(' without ')' or without an operator and a version, an unknown
/// operator, an unclosed '[' or '<', other text after an alternative.
std::vector<RelationGroup> parse_relations(std::string_view value, const char* field, std::int64_t line,
                                           const char* fn = "parse_relations");

/// Parses deb822 text holding package paragraphs (Note [deb822 parsing]). `source` names the input in
/// errors (a file name, or the command that printed it).
std::vector<DebianPackage> parse_debian_packages(std::string_view text, const std::string& source = "<text>");

/// The command read_apt_packages runs by default.
inline constexpr const char* kAptDumpCommand = "apt-cache dumpavail";

/// Runs `command` (a shell command; by default `apt-cache dumpavail`, which prints the whole index
/// apt knows) and parses what it prints. Errors (xgrad::Error): the command cannot be started or
/// exits with a non-zero status (naming both); it prints nothing — the state of a fresh container,
/// whose /var/lib/apt/lists is empty — with a message saying to run `apt-get update` as root;
/// malformed output (parse_debian_packages).
std::vector<DebianPackage> read_apt_packages(const std::string& command = kAptDumpCommand);

/// The depends-on graph of a package list. Rule (examples/package_graph and docs/sparse.md use it):
/// package i has an edge to package j when j's name appears in i's Depends, Pre-Depends, Recommends
/// or Suggests; every alternative of an `a | b` group gives an edge (each can satisfy the relation),
/// version constraints and architecture qualifiers are ignored, and a name that is no package of
/// the list — a virtual package (one that other packages only Provide) or one missing from the
/// index — gives no edge. Edges are unique and self-loops dropped. When a name appears in several
/// paragraphs, the first one is the package.
struct DependencyGraph {
  /// Edges (package, dependency) as indices into the package list, sorted.
  std::vector<std::int64_t> src, dst;
  /// Relation alternatives naming no package of the list (virtual or missing), counted per mention.
  std::int64_t unresolved = 0;
  /// Paragraphs whose name appeared before (ignored as targets; their own relations are kept).
  std::int64_t duplicate_names = 0;
};
DependencyGraph dependency_edges(const std::vector<DebianPackage>& packages);

}  // namespace xgrad::nn::datasets
