# The P2P store's programs (docs/p2p-store.md): the example program of the contract.
mc_tool(p2p-store-example p2p ${CMAKE_CURRENT_SOURCE_DIR}/p2p_store_example.c)
