# cmake -DREADME=<README.md> -DSOURCE=<file.cpp> -P check_readme_example.cmake
# Fails unless README contains SOURCE verbatim inside a ```cpp block, so the README's example is
# always code that compiles and runs (it is built and run as the example_quickstart test).
file(READ ${README} readme)
file(READ ${SOURCE} source)
string(FIND "${readme}" "```cpp\n${source}```" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not contain ${SOURCE} verbatim in a ```cpp block: copy the file into the README")
endif()
message(STATUS "README.md shows ${SOURCE} verbatim")
