# Master HA across hosts in network namespaces (tests/test_netns_ha.c; needs root, iproute2 and etcd; fails
# with the reason otherwise): a 3-member etcd cluster with etcd's default timing, three masters with
# --enable_ha, two holders and two writers (tests/netns_node), each in its own namespace. Leader SIGKILLs
# under load (the failover distribution), etcd members killed, the leader partitioned from etcd.
#
# NOT in the default run yet (-DMC_TEST_NETNS_HA=ON builds and registers it): it fails on two defects it
# found in src/, open in issue 14's notes: (1) the routine first remount after a holder's mount uploads its
# index to a master that still holds those objects, and rebuild.c answers each entry with a DROP, so the
# holder forgets live objects and the next failover loses them (~65 puts per run); (2) with etcd's default
# timing, killing etcd's raft leader can stall the HA leader's keepalives past TTL/2 (it stops serving for
# ~0.6 s). The failover timing, partition and byte checks pass.
option(MC_TEST_NETNS_HA "build and run test_netns_ha (fails until the defects above are fixed)" OFF)
if(MC_TEST_NETNS_HA)
  mc_test(test_netns_ha ${CMAKE_CURRENT_SOURCE_DIR}/test_netns_ha.c)
  target_link_libraries(test_netns_ha PRIVATE mc_client)
  add_dependencies(test_netns_ha netns_node mooncake_master)
  set_tests_properties(test_netns_ha PROPERTIES TIMEOUT 180
    ENVIRONMENT "MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools;MC_NETNS_NODE=$<TARGET_FILE:netns_node>")
endif()
