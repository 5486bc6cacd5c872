# The Python package tests (tests/python, pytest under Debian's /usr/bin/python3) against the build's
# package (<build>/python) and binaries. Not registered in the sanitizer build: an ASan-instrumented
# extension can only be loaded into an interpreter started with LD_PRELOAD=libasan, which the
# interpreter's own allocations then trip over; the C code behind it is covered by the C tests there.
if(MC_SANITIZE)
  message(STATUS "Python tests skipped in the sanitizer build (an ASan extension needs libasan preloaded into the interpreter)")
  return()
endif()
if(NOT TARGET mooncake_py)
  message(STATUS "Python tests skipped: the extension is not built (Python headers missing)")
  return()
endif()
set(MC_PYTEST ${MC_PYTHON_EXECUTABLE} -m pytest -q -p no:cacheprovider)
foreach(part guide store_api store_p2 engine_api xproc integrations install ha tensor standalone rpc)
  add_test(NAME py_${part} COMMAND ${MC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/python/test_${part}.py
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/python)
  set_tests_properties(py_${part} PROPERTIES TIMEOUT 300 ENVIRONMENT
    "PYTHONPATH=${CMAKE_BINARY_DIR}/python;MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools;MC_BUILD_DIR=${CMAKE_BINARY_DIR}")
endforeach()
# the guide's test takes the guide's fixed ports 2379/50051 when they are free
set_tests_properties(py_guide PROPERTIES RESOURCE_LOCK mc_guide_ports)
