# Master HA over etcd (docs/ha.md, "Election and failover"): tests/test_ha.c
mc_test(test_ha ${CMAKE_CURRENT_SOURCE_DIR}/test_ha.c)
target_link_libraries(test_ha PRIVATE mc_client)
add_dependencies(test_ha mooncake_master)
set_tests_properties(test_ha PROPERTIES TIMEOUT 240)
