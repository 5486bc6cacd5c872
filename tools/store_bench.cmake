# store_bench (bench/run_store_bench.sh): store-client and master RPC benchmarks, and the memcached reference
# client it is compared with.
mc_tool(store_bench client ${CMAKE_SOURCE_DIR}/bench/store_bench.c)
target_link_libraries(store_bench PRIVATE mc_client)
target_include_directories(store_bench PRIVATE ${CMAKE_SOURCE_DIR}/tests) # lib/master_client.h (raw master RPCs)
add_executable(memcached_ref ${CMAKE_SOURCE_DIR}/bench/memcached_ref.c)
target_link_libraries(memcached_ref PRIVATE mc_common)
# master_scale (bench/run_master_scale.sh): the store at a million keys.
mc_tool(master_scale client ${CMAKE_SOURCE_DIR}/bench/master_scale.c)
target_link_libraries(master_scale PRIVATE mc_client)
# master_segments (bench/run_master_segments.sh): the master at many segments, over raw master RPCs.
mc_tool(master_segments proto ${CMAKE_SOURCE_DIR}/bench/master_segments.c)
target_include_directories(master_segments PRIVATE ${CMAKE_SOURCE_DIR}/tests) # lib/master_client.h
