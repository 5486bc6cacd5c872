# A lone master restarted loses no completed object (docs/ha.md): tests/test_ha_restart.c
mc_test(test_ha_restart ${CMAKE_CURRENT_SOURCE_DIR}/test_ha_restart.c)
target_link_libraries(test_ha_restart PRIVATE mc_client)
add_dependencies(test_ha_restart mooncake_master)
set_tests_properties(test_ha_restart PROPERTIES TIMEOUT 180)
