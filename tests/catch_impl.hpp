#pragma once
// Catch2's session, run from a program's main: the tests' main (support/support.cpp) and the MPI
// test's (tests/distributed/test_ddp.cpp). Catch::Session is declared only where the implementation
// is compiled (CATCH_CONFIG_RUNNER), which is once, in catch_impl.cpp.
namespace xgrad::test {
/// Catch::Session().run(argc, argv); reporter, when not null, replaces the default reporter (before
/// the command line, which can still override it). Returns the number of failed test cases.
int run_catch_session(int argc, char** argv, const char* reporter = nullptr);
}  // namespace xgrad::test
