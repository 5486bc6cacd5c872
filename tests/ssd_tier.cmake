# The store client's local-disk tier (docs/disk-tier.md) against real mooncake_master processes: opening and
# recovery at setup, REPORT_SSD, the master's per-segment fields, gauges and summary, hostile reports.
mc_test(test_ssd_tier ${CMAKE_CURRENT_SOURCE_DIR}/test_ssd_tier.c)
target_link_libraries(test_ssd_tier PRIVATE mc_proto mc_client mc_disk m)
add_dependencies(test_ssd_tier mooncake_master)
set_tests_properties(test_ssd_tier PROPERTIES TIMEOUT 120)
