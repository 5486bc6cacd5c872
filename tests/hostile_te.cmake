# Hostile peers against the resource bounds and files (issue #20, defects 7 and 8): the TCP data port,
# the HTTP servers, the metadata server, the master's --log_dir and drain jobs, all as real processes.
mc_test(test_hostile_te ${CMAKE_CURRENT_SOURCE_DIR}/test_hostile_te.c)
target_link_libraries(test_hostile_te PRIVATE mc_proto mc_client)
add_dependencies(test_hostile_te mooncake_master mooncake_http_metadata_server)
set_tests_properties(test_hostile_te PROPERTIES TIMEOUT 240)
