# Admin/metrics HTTP server tests against real mooncake_master processes, real store clients, and a real
# Prometheus + promtool (Debian's prometheus package).
foreach(t test_admin test_prometheus)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
    mc_test(${t} ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
    target_link_libraries(${t} PRIVATE mooncake_proto mooncake_store m)
    add_dependencies(${t} mooncake_master)
    set_tests_properties(${t} PROPERTIES TIMEOUT 120)
  endif()
endforeach()
