# The P2P store (docs/p2p-store.md) with real processes, engines and metadata services (our HTTP server, etcd).
mc_test(test_p2p ${CMAKE_CURRENT_SOURCE_DIR}/test_p2p.c)
target_link_libraries(test_p2p PRIVATE mc_p2p)
set_tests_properties(test_p2p PROPERTIES TIMEOUT 600)
add_dependencies(test_p2p p2p-store-example mooncake_p2p_tool)
