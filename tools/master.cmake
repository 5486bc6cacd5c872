mc_tool(mooncake_master master ${CMAKE_CURRENT_SOURCE_DIR}/mooncake_master.c)
