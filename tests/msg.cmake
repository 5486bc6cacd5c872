# The message API (include/mooncake/transfer_engine.h, "Messages"; RpcInterface's transport): tests/test_msg.c
mc_test(test_msg ${CMAKE_CURRENT_SOURCE_DIR}/test_msg.c)
