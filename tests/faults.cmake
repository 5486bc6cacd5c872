# test_faults (tests/test_faults.c): a holder on a host whose CPUs are saturated by another process (one
# spinning child per CPU for 12 s) must keep pinging. RUN_SERIAL: it loads every CPU while it runs.
mc_test(test_faults ${CMAKE_CURRENT_SOURCE_DIR}/test_faults.c)
target_link_libraries(test_faults PRIVATE mc_client)
if(TARGET mooncake_master)
  add_dependencies(test_faults mooncake_master)
endif()
set_tests_properties(test_faults PROPERTIES TIMEOUT 120 RUN_SERIAL TRUE
  ENVIRONMENT "MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools")
