# Hostile clients against the real mooncake_master binary (issue #20; docs/master.md "Limits").
mc_test(test_hostile_master ${CMAKE_CURRENT_SOURCE_DIR}/test_hostile_master.c)
target_link_libraries(test_hostile_master PRIVATE mc_master m)
add_dependencies(test_hostile_master mooncake_master)
set_tests_properties(test_hostile_master PROPERTIES TIMEOUT 240)
