# cmake -DXGRAD_BUILD_DIR=... -DCONSUMER_SOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... \
#       -DCXX_COMPILER=... -DBUILD_TYPE=... -P run_consumer_test.cmake
# Installs the xgrad build tree (its configuration BUILD_TYPE) into a fresh prefix, then configures,
# builds and runs the out-of-tree consumer project against that prefix only. Any failing step fails
# the test.
foreach(var XGRAD_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer_test.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${WORK_DIR})

function(run_step name)
  message(STATUS "consumer test: ${name}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: ${name} failed (${rc})")
  endif()
endfunction()

run_step(install ${CMAKE_COMMAND} --install ${XGRAD_BUILD_DIR} --prefix ${prefix} --config ${BUILD_TYPE})
foreach(path include/xgrad/xgrad.hpp include/xgrad/core/tensor.hpp include/xgrad/ops/elementwise.hpp
             include/xgrad/nn/module.hpp)
  if(NOT EXISTS ${prefix}/${path})
    message(FATAL_ERROR "consumer test: the install lacks ${path}")
  endif()
endforeach()
file(GLOB_RECURSE config ${prefix}/*/cmake/xgrad/xgradConfig.cmake)
if(NOT config)
  message(FATAL_ERROR "consumer test: the install lacks lib/cmake/xgrad/xgradConfig.cmake")
endif()

# CMAKE_FIND_USE_PACKAGE_REGISTRY off and only the fresh prefix on the path: the consumer can find
# xgrad nowhere but in what was just installed. No CMAKE_BUILD_TYPE, as in docs/getting-started.md:
# the consumer's CMakeLists.txt (the recipe) makes it Release, which main.cpp checks.
run_step(configure ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${build} -G ${GENERATOR}
         -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run_step(build ${CMAKE_COMMAND} --build ${build})
run_step(run ${build}/consumer)
