# Snapshots of the master's object table (docs/ha.md, "Snapshots"): tests/test_snapshot.c
mc_test(test_snapshot ${CMAKE_CURRENT_SOURCE_DIR}/test_snapshot.c)
target_link_libraries(test_snapshot PRIVATE mc_client)
target_compile_definitions(test_snapshot PRIVATE MC_TEST_DATA_DIR="${CMAKE_CURRENT_SOURCE_DIR}/data")
add_dependencies(test_snapshot mooncake_master mooncake)
set_tests_properties(test_snapshot PROPERTIES TIMEOUT 180)
