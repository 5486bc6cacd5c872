# Operator tools (issue 5): deploy/ checked by promtool, systemd-analyze and a real master
# (tests/test_deploy.py), and the `mooncake` CLI + trace_replay against a live cluster (test_cli).
add_test(NAME test_deploy COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_deploy.py ${CMAKE_SOURCE_DIR}
         ${CMAKE_BINARY_DIR}/tools)
set_tests_properties(test_deploy PROPERTIES TIMEOUT 120)
# The conversation trace is a data set kept outside the repository (docs/testing.md, "Data sets").
if(NOT MC_TRACE_FILE)
  find_file(MC_TRACE_FILE conversation_trace.jsonl PATHS ${CMAKE_SOURCE_DIR}/.. PATH_SUFFIXES data shared/data
            NO_DEFAULT_PATH DOC "the FAST'25 conversation trace (test_cli, bench/run_trace_replay.sh)")
endif()
mc_test(test_cli ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.c)
target_link_libraries(test_cli PRIVATE mc_client mooncake_ops m)
add_dependencies(test_cli mooncake mooncake_master mooncake_store_node mooncake_client trace_replay)
set_tests_properties(test_cli PROPERTIES TIMEOUT 120 ENVIRONMENT
  "MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools;MC_TRACE=${MC_TRACE_FILE}")
