# The RDMA transport's pure logic, on any host (docs/rdma.md)
mc_test(test_rdma_logic ${CMAKE_CURRENT_SOURCE_DIR}/test_rdma_logic.c)
