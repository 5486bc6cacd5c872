# Standalone client mode (docs/standalone.md): a real mooncake_master, a real mooncake_client process and
# dummy clients in other processes; hostile peers on the dummies' socket.
mc_test(test_standalone ${CMAKE_CURRENT_SOURCE_DIR}/test_standalone.c)
target_link_libraries(test_standalone PRIVATE mc_standalone)
set_tests_properties(test_standalone PROPERTIES TIMEOUT 240)
if(TARGET mooncake_master AND TARGET mooncake_client)
  add_dependencies(test_standalone mooncake_master mooncake_client)
endif()
