mc_tool(te_demo ${CMAKE_CURRENT_SOURCE_DIR}/te_demo.c)
