// Tests for nn/datasets/debian_packages.*: deb822 paragraphs of the shape `apt-cache dumpavail`
// prints (continuation lines, relation fields with alternatives, version constraints, architecture
// qualifiers and restrictions), each malformed input refused with its line and reason, the
// dependency graph rule, read_apt_packages's command handling (exit status, the empty index), and
// the real index of this machine (skipped with a warning when apt's index is empty, unless the suite
// is configured with XGRAD_REQUIRE_ALL).
#include <string>
#include <vector>

#include "support.hpp"
#include "xgrad/core/error.hpp"
#include "xgrad/nn/datasets/debian_packages.hpp"

using namespace xgrad;
namespace ds = xgrad::nn::datasets;
using Catch::Matchers::Contains;

namespace {

// Two paragraphs as apt-cache dumpavail prints them (trimmed), plus a third in contrib with CRLF
// line ends and whitespace-only separator lines.
const std::string kIndex =
    "Package: 0ad\n"
    "Version: 0.0.26-3\n"
    "Architecture: amd64\n"
    "Depends: 0ad-data (>= 0.0.26), 0ad-data (<= 0.0.26-3), libc6 (>= 2.34), libgcc-s1 (>= 3.4),\n"
    " libstdc++6 (>= 12), python3:any | python3-minimal:any (>> 3.9~)\n"
    "Pre-Depends: dpkg (>= 1.15.6~)\n"
    "Description: Real-time strategy game of ancient warfare\n"
    "Tag: game::strategy, interface::graphical, interface::x11, role::program,\n"
    " uitoolkit::sdl, uitoolkit::wxwidgets, use::gameplaying,\n"
    "\tx11::application\n"
    "Section: games\n"
    "Priority: optional\n"
    "\n"
    "Package: 0ad-data\n"
    "Suggests: 0ad, mail-transport-agent | postfix [amd64 !i386] <!nocheck>\n"
    "Recommends:\n"
    "Description: Real-time strategy game of ancient warfare (data files)\n"
    " A long description line that is not part of the short one.\n"
    " .\n"
    "Section: games\n"
    "  \t\n"
    "Package: firmware-foo\r\n"
    "section: non-free-firmware/kernel\r\n"
    "Depends: 0ad-data(=1.0)\r\n";

std::string message_of(const std::string& text) {
  try {
    ds::parse_debian_packages(text, "test.txt");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("parse_debian_packages reads real-shaped paragraphs", "[datasets][debian]") {
  const auto packages = ds::parse_debian_packages(kIndex);
  REQUIRE(packages.size() == 3);

  const auto& ad = packages[0];
  CHECK(ad.name == "0ad");
  CHECK(ad.line == 1);
  CHECK(ad.area == "main");
  CHECK(ad.section == "games");
  CHECK(ad.description == "Real-time strategy game of ancient warfare");
  // the continuation line of Depends joins the field: 6 groups, the last with two alternatives
  REQUIRE(ad.depends.size() == 6);
  CHECK(ad.depends[0].size() == 1);
  CHECK(ad.depends[0][0].name == "0ad-data");
  CHECK(ad.depends[0][0].op == ">=");
  CHECK(ad.depends[0][0].version == "0.0.26");
  CHECK(ad.depends[1][0].op == "<=");
  CHECK(ad.depends[1][0].version == "0.0.26-3");
  CHECK(ad.depends[4][0].name == "libstdc++6");
  REQUIRE(ad.depends[5].size() == 2);
  CHECK(ad.depends[5][0].name == "python3");
  CHECK(ad.depends[5][0].arch == "any");
  CHECK(ad.depends[5][0].op.empty());
  CHECK(ad.depends[5][1].name == "python3-minimal");
  CHECK(ad.depends[5][1].arch == "any");
  CHECK(ad.depends[5][1].op == ">>");
  CHECK(ad.depends[5][1].version == "3.9~");
  REQUIRE(ad.pre_depends.size() == 1);
  CHECK(ad.pre_depends[0][0].name == "dpkg");
  CHECK(ad.pre_depends[0][0].version == "1.15.6~");
  CHECK(ad.recommends.empty());

  const auto& data = packages[1];
  CHECK(data.name == "0ad-data");
  CHECK(data.line == 14);
  // only the first line of Description is the short description
  CHECK(data.description == "Real-time strategy game of ancient warfare (data files)");
  CHECK(data.recommends.empty());  // an empty field is no relation
  REQUIRE(data.suggests.size() == 2);
  REQUIRE(data.suggests[1].size() == 2);
  CHECK(data.suggests[1][0].name == "mail-transport-agent");
  CHECK(data.suggests[1][1].name == "postfix");  // the architecture list and profile are dropped
  CHECK(data.suggests[1][1].arch.empty());

  const auto& fw = packages[2];
  CHECK(fw.name == "firmware-foo");  // the '\r' of CRLF is not part of the value
  CHECK(fw.line == 22);
  CHECK(fw.area == "non-free-firmware");  // field names are case-insensitive; the area is split off
  CHECK(fw.section == "kernel");
  REQUIRE(fw.depends.size() == 1);
  CHECK(fw.depends[0][0].name == "0ad-data");
  CHECK(fw.depends[0][0].op == "=");
  CHECK(fw.depends[0][0].version == "1.0");
}

TEST_CASE("parse_debian_packages: blank input, trailing blank lines", "[datasets][debian]") {
  CHECK(ds::parse_debian_packages("").empty());
  CHECK(ds::parse_debian_packages("\n \n\t\n").empty());
  const auto p = ds::parse_debian_packages("\n\nPackage: a\n\n\n\nPackage: b\n\n");
  REQUIRE(p.size() == 2);
  CHECK(p[0].line == 3);
  CHECK(p[1].line == 7);
  CHECK(p[0].section.empty());
  CHECK(p[0].description.empty());
}

TEST_CASE("parse_debian_packages refuses malformed paragraphs, naming the line", "[datasets][debian]") {
  struct Case {
    std::string text, expected;
  };
  const std::vector<Case> cases = {
      {"Package: a\nno colon here\n", "test.txt: line 2: no ':' in 'no colon here'"},
      {" continued\nPackage: a\n", "line 1: a continuation line (starting with a space or tab) before any field"},
      {"Package: a\n\n\tcontinued\n", "line 3: a continuation line"},
      {"Version: 1\nSection: net\n", "line 1: the paragraph starting here has no Package field"},
      {"Package: a\n\nVersion: 1\n", "line 3: the paragraph starting here has no Package field"},
      {"Package:\n", "line 1: Package '' is not a package name"},
      {"Package: -a\n", "line 1: Package '-a' is not a package name"},
      {"Package: a b\n", "Package 'a b' is not a package name"},
      {"Package: a\n: value\n", "line 2: an empty field name before ':'"},
      {"Package: a\nSome Field: x\n", "line 2: field name 'Some Field' holds a space or control character"},
      {"Package: a\nDepends: b\ndepends: c\n",
       "line 3: field 'depends' appears twice in the paragraph starting at line 1"},
      {"Package: a\n b\n", "line 2: the Package field continues on a second line"},
      {"Package: a\nSection: x\n y\n", "line 3: the Section field continues on a second line"},
      {"Package: a\nDepends: b, , c\n", "line 2: field Depends: an empty relation (nothing between commas)"},
      {"Package: a\nDepends: b,\n", "line 2: field Depends: an empty relation"},
      {"Package: a\nRecommends: b | | c\n", "field Recommends: an empty alternative after '|'"},
      {"Package: a\nSuggests: b (>= 1\n", "field Suggests: '(' of 'b' without a closing ')'"},
      {"Package: a\nDepends: b (1.0)\n", "no version operator after '(' of 'b'"},
      {"Package: a\nDepends: b (=> 1.0)\n", "unknown version operator '=>'"},
      {"Package: a\nDepends: b (>= )\n", "no version after '>=' of 'b'"},
      {"Package: a\nDepends: b:\n", "an empty architecture qualifier after 'b:'"},
      {"Package: a\nDepends: b [amd64\n", "'[' without a closing ']'"},
      {"Package: a\nDepends: b <!nocheck\n", "'<' without a closing '>'"},
      {"Package: a\nDepends: b c\n", "unexpected 'c' after a relation"},
      {"Package: a\nDepends: .b\n", "package name '.b' does not start with a letter or digit"},
      {"Package: a\nPre-Depends: b, #c\n", "field Pre-Depends: unexpected character '#' where a package name starts"},
      // the line of a relation error is the field's first line, also when the error is on a continuation
      {"Package: a\nVersion: 1\nDepends: b,\n c (>= 1\n", "line 3: field Depends"},
  };
  for (const auto& c : cases) {
    INFO("input: " << c.text);
    const std::string message = message_of(c.text);
    CHECK_THAT(message, Contains("parse_debian_packages") && Contains(c.expected));
  }
}

TEST_CASE("parse_relations: groups, alternatives, whitespace", "[datasets][debian]") {
  const auto groups = ds::parse_relations("  a(<<2) |b:native ,\n\tc ( >= 1:2.0-1 ) [linux-any]  ", "Depends", 7);
  REQUIRE(groups.size() == 2);
  REQUIRE(groups[0].size() == 2);
  CHECK(groups[0][0].name == "a");
  CHECK(groups[0][0].op == "<<");
  CHECK(groups[0][0].version == "2");
  CHECK(groups[0][1].name == "b");
  CHECK(groups[0][1].arch == "native");
  CHECK(groups[1][0].name == "c");
  CHECK(groups[1][0].version == "1:2.0-1");
  CHECK(ds::parse_relations(" \t", "Depends", 1).empty());
  CHECK_THROWS_WITH(ds::parse_relations("a |", "Suggests", 9),
                    Contains("parse_relations: line 9: field Suggests: an empty alternative after '|'"));
  // a hostile value is cut in the message
  const std::string long_value = "a " + std::string(100000, 'b');
  CHECK_THROWS_WITH(ds::parse_relations(long_value, "Depends", 1), Contains("...") && !Contains(std::string(100, 'b')));
}

TEST_CASE("dependency_edges: alternatives, virtual names, duplicates, self-loops", "[datasets][debian]") {
  const auto packages = ds::parse_debian_packages(
      "Package: app\nDepends: lib (>= 1), mta | postfix, app, lib\nRecommends: docs:any\nSuggests: missing\n\n"
      "Package: lib\nPre-Depends: libc\n\n"
      "Package: postfix\nDepends: lib\n\n"
      "Package: docs\n\n"
      "Package: libc\n\n"
      "Package: lib\nDepends: postfix\n");
  const auto g = ds::dependency_edges(packages);
  // app -> lib (twice: one edge), postfix (an alternative; mta is virtual), docs (arch qualifier
  // ignored); app -> app is a self-loop; lib -> libc; postfix -> lib; the second "lib" paragraph is
  // not a target, but its own relation counts (5 -> postfix)
  CHECK(g.src == std::vector<std::int64_t>{0, 0, 0, 1, 2, 5});
  CHECK(g.dst == std::vector<std::int64_t>{1, 2, 3, 4, 1, 2});
  CHECK(g.unresolved == 2);  // mta, missing
  CHECK(g.duplicate_names == 1);
}

TEST_CASE("read_apt_packages: a command's output, its exit status, the empty index", "[datasets][debian]") {
  const auto p =
      ds::read_apt_packages("printf 'Package: a\\nSection: contrib/net\\nDepends: b | c\\n\\nPackage: b\\n'");
  REQUIRE(p.size() == 2);
  CHECK(p[0].area == "contrib");
  CHECK(p[0].section == "net");
  CHECK(p[0].depends[0].size() == 2);
  // an empty index (a fresh container) says what to run
  CHECK_THROWS_WITH(ds::read_apt_packages("true"), Contains("read_apt_packages: 'true' printed nothing") &&
                                                       Contains("apt-get update") && Contains("as root"));
  CHECK_THROWS_WITH(ds::read_apt_packages("printf '\\n \\n'"), Contains("printed nothing"));
  CHECK_THROWS_WITH(ds::read_apt_packages("exit 3"), Contains("read_apt_packages: 'exit 3' failed with exit status 3"));
  CHECK_THROWS_WITH(ds::read_apt_packages("xgrad-no-such-command-here 2>/dev/null"),
                    Contains("exit status 127 (command not found)"));
  CHECK_THROWS_WITH(ds::read_apt_packages("kill -9 $$"), Contains("killed by signal 9"));
  // a parse error names the command's output as the source
  CHECK_THROWS_WITH(ds::read_apt_packages("echo oops"),
                    Contains("parse_debian_packages: output of 'echo oops': line 1: no ':' in 'oops'"));
}

TEST_CASE("read_apt_packages reads this machine's index", "[datasets][debian]") {
  std::vector<ds::DebianPackage> packages;
  try {
    packages = ds::read_apt_packages();
  } catch (const Error& e) {
    // an empty index is the state of a fresh container; scripts/install-deps.sh (run by main.sh and
    // test.sh) runs apt-get update first.
    // Skipped with a warning then, but a failure under XGRAD_REQUIRE_ALL (a full run skips nothing).
    const std::string what = e.what();
    REQUIRE_THAT(what, Contains("printed nothing"));
#ifdef XGRAD_REQUIRE_DATASETS
    FAIL("apt's package index is empty: " << what);
#else
    WARN("apt's package index is empty, test skipped: " << what);
    return;
#endif
  }
  REQUIRE(packages.size() > 1000);
  const auto g = ds::dependency_edges(packages);
  CHECK(g.src.size() > packages.size());  // Debian's graph has several edges per package
  std::size_t with_section = 0, with_slash = 0;
  for (const auto& p : packages) {
    with_section += !p.section.empty();
    with_slash += p.section.find('/') != std::string::npos;
  }
  CHECK(with_section == packages.size());
  CHECK(with_slash == 0);  // the area prefix is split off
  // dpkg is in every Debian index, in section admin, and depends on something that is there
  bool found = false;
  for (const auto& p : packages)
    if (p.name == "dpkg") {
      found = true;
      CHECK(p.section == "admin");
      CHECK((!p.depends.empty() || !p.pre_depends.empty()));
    }
  CHECK(found);
}
