# The RDMA guest (docs/testing.md, "The RDMA guest"): a qemu guest with a Soft-RoCE device, rxe0, in which the
# RDMA transport's tests run. The smoke test boots it and checks the device and an ib_write_bw pair; it is
# skipped (77) when qemu or the guest kernel is missing (scripts/install-deps.sh installs both).
add_test(NAME test_rdma_guest_smoke COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/rdma_guest_smoke.sh)
set_tests_properties(test_rdma_guest_smoke PROPERTIES TIMEOUT 150 SKIP_RETURN_CODE 77)

# The RDMA transport's data path on rxe0 (tests/test_rdma_guest.c: three processes doing every check), then the
# store and the Python package over rdma (tests/rdma_guest_store.py), in one guest boot. Skipped (77) when no
# guest can be had here.
add_executable(test_rdma_guest ${CMAKE_CURRENT_SOURCE_DIR}/test_rdma_guest.c)
target_link_libraries(test_rdma_guest PRIVATE mc_te)
target_include_directories(test_rdma_guest PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
# The sanitizer build runs the C part only (python.cmake says why the Python tests are not run there).
if(MC_SANITIZE)
  set(MC_RDMA_GUEST_PY -)
else()
  set(MC_RDMA_GUEST_PY ${CMAKE_BINARY_DIR}/python)
endif()
add_test(NAME test_rdma_guest COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/rdma_guest_run.sh bash
         ${CMAKE_CURRENT_SOURCE_DIR}/rdma_guest_suite.sh $<TARGET_FILE:test_rdma_guest> ${CMAKE_BINARY_DIR}/tools
         ${MC_RDMA_GUEST_PY} ${MC_PYTHON_EXECUTABLE})
set_tests_properties(test_rdma_guest PROPERTIES TIMEOUT 420 SKIP_RETURN_CODE 77)
