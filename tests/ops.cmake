# Operator tools (issue 5): deploy/ checked by promtool, systemd-analyze and a real master
# (tests/test_deploy.py), and the `mooncake` CLI + trace_replay against a live cluster (test_cli).
add_test(NAME test_deploy COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_deploy.py ${CMAKE_SOURCE_DIR}
         ${CMAKE_BINARY_DIR}/tools)
set_tests_properties(test_deploy PROPERTIES TIMEOUT 120)
