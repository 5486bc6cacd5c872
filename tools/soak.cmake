# soak (bench/run_soak.sh): a long mixed workload of 16 store clients over a shared key space, every read
# checked byte for byte.
mc_tool(soak client ${CMAKE_SOURCE_DIR}/bench/soak.c)
target_link_libraries(soak PRIVATE mc_client m)
