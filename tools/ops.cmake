# Operator tools (issue 5): the `mooncake` CLI over the master's admin HTTP port, the storage-node
# daemon used by deploy/, and bench/trace_replay. tools/cli/admin.c is their shared HTTP + Prometheus glue.
add_library(mooncake_ops STATIC ${CMAKE_CURRENT_SOURCE_DIR}/cli/admin.c)
target_link_libraries(mooncake_ops PUBLIC mc_meta PkgConfig::JANSSON m)
target_include_directories(mooncake_ops PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
# trace_replay (bench/run_trace_replay.sh): replays a KV-block trace against a cluster.
mc_tool(trace_replay client ${CMAKE_SOURCE_DIR}/bench/trace_replay.c)
target_link_libraries(trace_replay PRIVATE mc_client mooncake_ops)
# The `mooncake` command-line tool (docs/operations.md).
add_executable(mooncake ${CMAKE_CURRENT_SOURCE_DIR}/cli/mooncake_cli.c)
target_link_libraries(mooncake PRIVATE mooncake_ops)
install(TARGETS mooncake RUNTIME DESTINATION bin)
# mooncake_store_node: the storage-node daemon the systemd unit in deploy/ runs.
mc_tool(mooncake_store_node client ${CMAKE_CURRENT_SOURCE_DIR}/mooncake_store_node.c)
target_link_libraries(mooncake_store_node PRIVATE mc_client)

# mooncake_client: the real client of standalone mode, serving dummy clients of its host (docs/standalone.md).
mc_tool(mooncake_client client ${CMAKE_CURRENT_SOURCE_DIR}/mooncake_client.c)
target_link_libraries(mooncake_client PRIVATE mc_standalone)
