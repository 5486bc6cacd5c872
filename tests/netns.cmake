# Multi-host store test in network namespaces (needs root + iproute2; fails with the reason otherwise):
# a master and three storage clients (tests/netns_node) on distinct addresses on a bridge.
add_executable(netns_node ${CMAKE_CURRENT_SOURCE_DIR}/netns_node.c)
target_link_libraries(netns_node PRIVATE mc_client)
mc_test(test_netns_cluster ${CMAKE_CURRENT_SOURCE_DIR}/test_netns_cluster.c)
target_link_libraries(test_netns_cluster PRIVATE mc_client)
add_dependencies(test_netns_cluster netns_node mooncake_master)
set_tests_properties(test_netns_cluster PROPERTIES TIMEOUT 180
  ENVIRONMENT "MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools;MC_NETNS_NODE=$<TARGET_FILE:netns_node>")
