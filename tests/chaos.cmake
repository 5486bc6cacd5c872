# Chaos tests (tests/test_store_chaos.c): processes killed and frozen under a running workload; every
# successful read is checked. One ctest per fault plan:
#   test_store_chaos           holders killed and frozen, writers with segments killed, the master restarted
#   test_store_chaos_client    pure clients (no segment) killed mid-operation; no key stays blocked
#   test_store_chaos_metadata  the standalone HTTP metadata server (--persist_path) killed and restarted
#   test_store_chaos_etcd      one member of a real 3-member etcd cluster killed and restarted
#   test_store_chaos_metadata_volatile  the same metadata server without --persist_path: it comes back
#                              empty, and the engines write their keys again (metadata_http.c)
# 20 s of chaos in optimized builds, 8 s under the sanitizers (MC_CHAOS_SECS overrides).
mc_test(test_store_chaos ${CMAKE_CURRENT_SOURCE_DIR}/test_store_chaos.c)
target_link_libraries(test_store_chaos PRIVATE mc_client)
foreach(dep mooncake_master mooncake_http_metadata_server)
  if(TARGET ${dep})
    add_dependencies(test_store_chaos ${dep})
  endif()
endforeach()
if(MC_SANITIZE)
  set(MC_CHAOS_DEFAULT_SECS 8)
else()
  set(MC_CHAOS_DEFAULT_SECS 20)
endif()
set_tests_properties(test_store_chaos PROPERTIES TIMEOUT 240
  ENVIRONMENT "MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools;MC_CHAOS_SECS=${MC_CHAOS_DEFAULT_SECS}")
foreach(plan client metadata metadata_volatile etcd)
  set(arg ${plan})
  if(plan STREQUAL "metadata")
    set(arg metadata_persist)
  endif()
  add_test(NAME test_store_chaos_${plan} COMMAND test_store_chaos ${arg})
  set_tests_properties(test_store_chaos_${plan} PROPERTIES TIMEOUT 240
    ENVIRONMENT "MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools;MC_CHAOS_SECS=${MC_CHAOS_DEFAULT_SECS}")
endforeach()
