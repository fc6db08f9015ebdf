# xgrad_add_layer(<layer> SOURCES ... DEPENDS ...)
# One library per layer (xgrad_core <- xgrad_ops <- xgrad_nn). Each layer's folder is exposed to
# the compiler as <xgrad/LAYER/...> through a per-layer link folder in the build tree, so a layer
# sees only its own headers and those of the layers it depends on: a wrong-way include fails.
set(XGRAD_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Woverloaded-virtual -Wnull-dereference -Wno-maybe-uninitialized)

option(XGRAD_SANITIZE_THREAD "Build with ThreadSanitizer (the tsan preset; not with XGRAD_SANITIZE)" OFF)

function(xgrad_compile_options target)
  target_compile_options(${target} PRIVATE ${XGRAD_WARNINGS})
  if(XGRAD_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(XGRAD_ARCH)
    target_compile_options(${target} PRIVATE -march=${XGRAD_ARCH})
  endif()
  if(XGRAD_SANITIZE AND XGRAD_SANITIZE_THREAD)
    message(FATAL_ERROR "XGRAD_SANITIZE (ASan) and XGRAD_SANITIZE_THREAD (TSan) cannot be combined")
  endif()
  if(XGRAD_SANITIZE)
    target_compile_options(${target} PUBLIC -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  endif()
  if(XGRAD_SANITIZE_THREAD)
    # -Wno-tsan: g++ warns that TSan does not model std::atomic_thread_fence (TBB's headers use it).
    target_compile_options(${target} PUBLIC -fsanitize=thread -fno-omit-frame-pointer -Wno-tsan)
    target_link_options(${target} PUBLIC -fsanitize=thread)
  endif()
endfunction()

# Note [Library PCH]: the standard and core headers that nearly every library file includes are parsed
# once, into a precompiled header of xgrad_core that xgrad_ops and xgrad_nn reuse (same flags), instead
# of in each of the ~80 files: about a third of a library file's compile time was that parse. The
# header only adds declarations in front of each file, but GCC's inlining can still depend on them: the
# objects were compared (objdump -d, function by function) with and without it, and the files whose
# code differed (the unary kernels of ops/define/pointwise.hpp, two nn files) skip it, as do the
# files compiled with other code-generation flags (the AVX-512 kernels, -fno-math-errno in nn/optim/:
# GCC would refuse it). Compare again after adding a file (docs/design.md, Compile time). XGRAD_PCH=OFF
# parses the headers in every file again (and checks that each file includes what it uses). ccache caches PCH builds only with sloppiness=pch_defines,time_macros.
option(XGRAD_PCH "Compile the library's common headers once (precompiled header)" ON)
set(XGRAD_PCH_HEADERS
    <algorithm> <array> <atomic> <cmath> <cstdint> <cstring> <functional> <limits> <memory> <mutex> <numeric>
    <optional> <span> <string> <string_view> <type_traits> <utility> <vector> <fmt/format.h>
    <xgrad/core/error.hpp> <xgrad/core/checked.hpp> <xgrad/core/parallel.hpp> <xgrad/core/tensor.hpp>
    <xgrad/core/autograd.hpp>)

function(xgrad_add_layer layer)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS" ${ARGN})
  set(name xgrad_${layer})
  add_library(${name} ${ARG_SOURCES})
  add_library(xgrad::${layer} ALIAS ${name})
  set(link_root ${CMAKE_BINARY_DIR}/include_${layer})
  file(MAKE_DIRECTORY ${link_root}/xgrad)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${layer} ${link_root}/xgrad/${layer} SYMBOLIC)
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${link_root}>
                                            $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPENDS})
  # C++20 is part of the interface (the public headers use <span> and other C++20): exported with the target, so
  # a consumer's find_package(xgrad) + xgrad::xgrad compiles as C++20 without setting it.
  target_compile_features(${name} PUBLIC cxx_std_20)
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${layer} OUTPUT_NAME xgrad_${layer})
  xgrad_compile_options(${name})
  if(XGRAD_PCH)
    if(layer STREQUAL "core")
      target_precompile_headers(${name} PRIVATE ${XGRAD_PCH_HEADERS})
    else()
      target_precompile_headers(${name} REUSE_FROM xgrad_core)
    endif()
  endif()
endfunction()
