# The P2P store's programs (docs/p2p-store.md): the example program of the contract and the command-line tool
# (the target is mooncake_p2p_tool, the library being mooncake_p2p; the program is mooncake_p2p).
mc_tool(p2p-store-example p2p ${CMAKE_CURRENT_SOURCE_DIR}/p2p_store_example.c)
mc_tool(mooncake_p2p_tool p2p ${CMAKE_CURRENT_SOURCE_DIR}/mooncake_p2p.c)
set_target_properties(mooncake_p2p_tool PROPERTIES OUTPUT_NAME mooncake_p2p)
