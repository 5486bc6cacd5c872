# A cluster with a secret (docs/security.md): members work, others are refused at every listener.
mc_test(test_auth_cluster ${CMAKE_CURRENT_SOURCE_DIR}/test_auth_cluster.c)
target_link_libraries(test_auth_cluster PRIVATE mc_client)
if(TARGET mooncake_master)
  add_dependencies(test_auth_cluster mooncake_master)
endif()
set_tests_properties(test_auth_cluster PROPERTIES TIMEOUT 180)
