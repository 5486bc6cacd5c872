# Chaos test: holders killed and frozen under a running workload; every successful read is checked.
# 20 s of chaos in optimized builds, 8 s under the sanitizers (MC_CHAOS_SECS overrides).
mc_test(test_store_chaos ${CMAKE_CURRENT_SOURCE_DIR}/test_store_chaos.c)
target_link_libraries(test_store_chaos PRIVATE mooncake_store)
if(TARGET mooncake_master)
  add_dependencies(test_store_chaos mooncake_master)
endif()
if(MC_SANITIZE)
  set(MC_CHAOS_DEFAULT_SECS 8)
else()
  set(MC_CHAOS_DEFAULT_SECS 20)
endif()
set_tests_properties(test_store_chaos PROPERTIES TIMEOUT 240
  ENVIRONMENT "MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools;MC_CHAOS_SECS=${MC_CHAOS_DEFAULT_SECS}")
