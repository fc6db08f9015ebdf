// Catch2's implementation (CATCH_CONFIG_RUNNER: everything but main), compiled once into the library
// xgrad_catch_impl that every test program links: the tests' main (support/support.cpp) and the MPI test's own
// main (tests/distributed/test_ddp.cpp) share it (Note [Test build time] in tests/CMakeLists.txt).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
