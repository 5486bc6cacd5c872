# Admin/metrics HTTP server tests against real mooncake_master processes, real store clients, and a real
# Prometheus + promtool (Debian's prometheus package, scripts/install-deps.sh).
mc_test(test_admin ${CMAKE_CURRENT_SOURCE_DIR}/test_admin.c)
target_link_libraries(test_admin PRIVATE mc_proto mc_client m)
add_dependencies(test_admin mooncake_master)
set_tests_properties(test_admin PROPERTIES TIMEOUT 120)
