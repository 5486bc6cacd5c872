# Network faults in namespaces (tests/test_netns_faults.c; needs root and iproute2): delay, loss,
# reordering (tc netem; reported NOT TESTED HERE, with the reason, on a kernel without netem, such as
# the development and CI machines') and link flaps on a holder's link while nodes read and write through it. Reuses test_netns_cluster's topology and
# tests/netns_node.
mc_test(test_netns_faults ${CMAKE_CURRENT_SOURCE_DIR}/test_netns_faults.c)
target_link_libraries(test_netns_faults PRIVATE mc_client)
add_dependencies(test_netns_faults netns_node mooncake_master)
set_tests_properties(test_netns_faults PROPERTIES TIMEOUT 240
  ENVIRONMENT "MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools;MC_NETNS_NODE=$<TARGET_FILE:netns_node>")
