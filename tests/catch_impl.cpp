// Catch2's implementation (CATCH_CONFIG_RUNNER: everything but main), compiled once into the library
// xgrad_catch_impl that every test program links: the tests' main (support/support.cpp) and the MPI
// test's own main (tests/distributed/test_ddp.cpp) both run it through run_catch_session (Note [Test
// build time] in tests/CMakeLists.txt).
#define CATCH_CONFIG_RUNNER
#include "catch_impl.hpp"

#include <catch2/catch.hpp>

namespace xgrad::test {
int run_catch_session(int argc, char** argv, const char* reporter) {
  Catch::Session session;
  if (reporter != nullptr) session.configData().reporterName = reporter;
  return session.run(argc, argv);
}
}  // namespace xgrad::test
