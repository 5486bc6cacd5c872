# Hostile peers against segment ownership and client expiry (issue #20, defects 5 and 6): a real master,
# holder processes (this binary re-run) and raw master clients.
mc_test(test_hostile_owner ${CMAKE_CURRENT_SOURCE_DIR}/test_hostile_owner.c)
target_link_libraries(test_hostile_owner PRIVATE mc_client)
set_tests_properties(test_hostile_owner PROPERTIES TIMEOUT 180)
if(TARGET mooncake_master)
  add_dependencies(test_hostile_owner mooncake_master)
endif()
