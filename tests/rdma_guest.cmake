# The RDMA guest (docs/testing.md, "The RDMA guest"): a qemu guest with a Soft-RoCE device, rxe0, in which the
# RDMA transport's tests run. The smoke test boots it and checks the device and an ib_write_bw pair; it is
# skipped (77) when qemu or the guest kernel is missing (scripts/install-deps.sh installs both).
add_test(NAME test_rdma_guest_smoke COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/rdma_guest_smoke.sh)
set_tests_properties(test_rdma_guest_smoke PROPERTIES TIMEOUT 150 SKIP_RETURN_CODE 77)
