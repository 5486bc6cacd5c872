mc_tool(te_demo te ${CMAKE_CURRENT_SOURCE_DIR}/te_demo.c)
