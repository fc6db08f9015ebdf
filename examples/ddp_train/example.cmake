# examples/ddp_train needs MPI (xgrad::distributed) besides xgrad::xgrad, so it describes its own target
# here; examples/CMakeLists.txt includes this file (see docs/distributed.md). Binary:
# build/<preset>/examples/ddp_train, run as `mpirun -np 2 build/<preset>/examples/ddp_train`.
if(NOT TARGET xgrad_distributed)
  return()  # built without MPI (XGRAD_WITH_MPI=OFF, or AUTO without MPI)
endif()
add_executable(example_ddp_train ${CMAKE_CURRENT_LIST_DIR}/ddp_train.cpp)
target_link_libraries(example_ddp_train PRIVATE xgrad::xgrad xgrad::distributed)
set_target_properties(example_ddp_train PROPERTIES OUTPUT_NAME ddp_train RUNTIME_OUTPUT_DIRECTORY
                                                                         ${CMAKE_CURRENT_BINARY_DIR})
xgrad_compile_options(example_ddp_train)
add_dependencies(examples example_ddp_train)
if(XGRAD_BUILD_TESTS)
  # Two ranks on this machine, loopback only; exits non-zero unless the loss fell tenfold.
  add_test(NAME example_ddp_train
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${XGRAD_MPIEXEC_FLAGS} ${MPIEXEC_PREFLAGS}
                   $<TARGET_FILE:example_ddp_train> --epochs 30)
  set_tests_properties(example_ddp_train PROPERTIES LABELS "example;distributed" TIMEOUT ${example_timeout} ENVIRONMENT
                       "OMPI_MCA_btl=self,tcp;OMPI_MCA_btl_tcp_if_include=lo;OMPI_MCA_oob_tcp_if_include=lo")
  if(XGRAD_SANITIZE)  # no leak checking for MPI programs: see tests/distributed/CMakeLists.txt
    set_property(TEST example_ddp_train APPEND PROPERTY ENVIRONMENT
                 "ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:detect_stack_use_after_return=1")
  endif()
endif()
