# A lone master restarted loses no completed object (docs/ha.md): tests/test_ha_restart.c
mc_test(test_ha_restart ${CMAKE_CURRENT_SOURCE_DIR}/test_ha_restart.c)
target_link_libraries(test_ha_restart PRIVATE mc_client)
add_dependencies(test_ha_restart mooncake_master)
set_tests_properties(test_ha_restart PROPERTIES TIMEOUT 180)

# Key groups kept across a restart (holder indexes) and a snapshot restore: tests/test_kgroup_durable.c
mc_test(test_kgroup_durable ${CMAKE_CURRENT_SOURCE_DIR}/test_kgroup_durable.c)
target_link_libraries(test_kgroup_durable PRIVATE mc_client)
add_dependencies(test_kgroup_durable mooncake_master mooncake)
set_tests_properties(test_kgroup_durable PROPERTIES TIMEOUT 180)
