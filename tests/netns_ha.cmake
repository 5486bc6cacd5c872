# Master HA across hosts in network namespaces (tests/test_netns_ha.c; needs root, iproute2 and etcd; fails
# with the reason otherwise): a 3-member etcd cluster with etcd's default timing, three masters with
# --enable_ha, two holders and two writers (tests/netns_node), each in its own namespace. Leader SIGKILLs
# under load (the failover distribution), etcd members killed, the leader partitioned from etcd, and every
# put that returned 0 read back with its bytes at the end.
mc_test(test_netns_ha ${CMAKE_CURRENT_SOURCE_DIR}/test_netns_ha.c)
target_link_libraries(test_netns_ha PRIVATE mc_client)
add_dependencies(test_netns_ha netns_node mooncake_master)
set_tests_properties(test_netns_ha PROPERTIES TIMEOUT 180
  ENVIRONMENT "MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools;MC_NETNS_NODE=$<TARGET_FILE:netns_node>")
