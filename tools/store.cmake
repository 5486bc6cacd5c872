# store_demo: command-line put/get through the store client.
mc_tool(store_demo client ${CMAKE_CURRENT_SOURCE_DIR}/store_demo.c)
target_link_libraries(store_demo PRIVATE mc_client)
