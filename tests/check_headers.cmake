# Build properties of the public headers (docs/design.md, Compile time: "A light umbrella header"), with
# the compiler and flags a consumer of xgrad::xgrad gets (FLAGS_FILE, written by tests/CMakeLists.txt).
# Usage: cmake -DMODE=<mode> -DCXX=<compiler> -DFLAGS_FILE=<file> -DWORK_DIR=<folder> ... -P check_headers.cmake
# - MODE=umbrella -DMAX_LINES=<n>: <xgrad/xgrad.hpp> pulls no xtensor, xtl or xsimd header and
#   preprocesses (-E -P) to at most n lines;
# - MODE=self_contained -DHEADERS=<a;b;...> (paths under include/, as xgrad/core/tensor.hpp): each
#   header compiles on its own (-fsyntax-only).
file(READ ${FLAGS_FILE} flags)
string(STRIP "${flags}" flags)
file(MAKE_DIRECTORY ${WORK_DIR})

if(MODE STREQUAL "umbrella")
  set(src ${WORK_DIR}/umbrella.cpp)
  file(WRITE ${src} "#include <xgrad/xgrad.hpp>\n")
  # -H lists every header opened, on stderr, one a line with dots for the depth.
  execute_process(COMMAND ${CXX} ${flags} -E -P -H ${src} -o ${WORK_DIR}/umbrella.i RESULT_VARIABLE rc
                  ERROR_VARIABLE tree)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_headers: preprocessing <xgrad/xgrad.hpp> failed:\n${tree}")
  endif()
  string(REGEX MATCHALL "[^\n]*/(xtensor|xtl|xsimd)/[^\n]*" third_party "${tree}")
  if(third_party)
    list(JOIN third_party "\n" text)
    message(FATAL_ERROR "check_headers: <xgrad/xgrad.hpp> includes xtensor, xtl or xsimd (only the opt-in "
                        "xgrad/core/xtensor_interop.hpp may):\n${text}")
  endif()
  file(READ ${WORK_DIR}/umbrella.i text)
  string(REGEX REPLACE "[^\n]" "" newlines "${text}")
  string(LENGTH "${newlines}" lines)
  string(REGEX MATCHALL "\n\\.+ " opened "\n${tree}")
  list(LENGTH opened headers)
  if(lines GREATER MAX_LINES)
    message(FATAL_ERROR "check_headers: <xgrad/xgrad.hpp> preprocesses to ${lines} lines (${headers} headers "
                        "opened), above the budget of ${MAX_LINES}: keep implementation-only includes in .cpp files")
  endif()
  message(STATUS "check_headers: <xgrad/xgrad.hpp>: ${lines} lines (budget ${MAX_LINES}), ${headers} headers "
                 "opened, none of xtensor, xtl or xsimd")
elseif(MODE STREQUAL "self_contained")
  set(failed "")
  set(count 0)
  foreach(header IN LISTS HEADERS)
    string(MAKE_C_IDENTIFIER "${header}" id)
    set(src ${WORK_DIR}/${id}.cpp)
    file(WRITE ${src} "#include <${header}>\n")
    execute_process(COMMAND ${CXX} ${flags} -fsyntax-only ${src} RESULT_VARIABLE rc ERROR_VARIABLE err)
    math(EXPR count "${count} + 1")
    if(NOT rc EQUAL 0)
      list(APPEND failed "${header}")
      message("${header} does not compile on its own:\n${err}")
    endif()
  endforeach()
  if(failed)
    list(JOIN failed ", " text)
    message(FATAL_ERROR "check_headers: headers that do not compile on their own: ${text}")
  endif()
  message(STATUS "check_headers: ${count} headers, each compiles on its own")
else()
  message(FATAL_ERROR "check_headers: MODE must be umbrella or self_contained, not '${MODE}'")
endif()
