# The P2P store (docs/p2p-store.md) with real processes, engines and metadata services (our HTTP server, etcd).
mc_test(test_p2p ${CMAKE_CURRENT_SOURCE_DIR}/test_p2p.c)
target_link_libraries(test_p2p PRIVATE mc_p2p)
set_tests_properties(test_p2p PROPERTIES TIMEOUT 600)
add_dependencies(test_p2p p2p-store-example mooncake_p2p_tool)
# mooncake.p2p (tests/python/test_p2p.py), as the Python tests of python.cmake are run (not in the sanitizer build)
if(TARGET mooncake_py AND NOT MC_SANITIZE)
  add_test(NAME py_p2p COMMAND ${MC_PYTHON_EXECUTABLE} -m pytest -q -p no:cacheprovider
           ${CMAKE_CURRENT_SOURCE_DIR}/python/test_p2p.py WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/python)
  set_tests_properties(py_p2p PROPERTIES TIMEOUT 300 ENVIRONMENT
    "PYTHONPATH=${CMAKE_BINARY_DIR}/python;MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools;MC_BUILD_DIR=${CMAKE_BINARY_DIR}")
endif()
# The fan-out across hosts (tests/test_netns_p2p.c): a source and six consumers (mooncake_p2p processes), each
# in its own network namespace on tbf-shaped veths, 1 GiB at once, every byte checked; needs root, iproute2
# (ip, tc) and sch_tbf, fails with the reason otherwise. MC_P2P_FANOUT_BENCH=1 makes it the fan-out bench
# (bench/run_p2p_fanout.sh). RUN_SERIAL: its seven processes move 6 GiB and keep both CPUs busy for a minute or
# two; in a -j2 run beside it test_netns_ha and py_store_api failed timed checks (both pass alone).
mc_test(test_netns_p2p ${CMAKE_CURRENT_SOURCE_DIR}/test_netns_p2p.c)
target_link_libraries(test_netns_p2p PRIVATE mc_client)
add_dependencies(test_netns_p2p mooncake_p2p_tool mooncake_http_metadata_server)
# Under the sanitizers 256 MiB in 16 MiB shards (the same 16 shards: the same exchange in a quarter of the time).
if(MC_SANITIZE OR MC_TSAN)
  set(MC_P2P_FANOUT_SIZE "MC_P2P_FANOUT_MIB=256;MC_P2P_FANOUT_SHARD_MB=16")
else()
  set(MC_P2P_FANOUT_SIZE "")
endif()
set_tests_properties(test_netns_p2p PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE
  ENVIRONMENT "MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools;${MC_P2P_FANOUT_SIZE}")
