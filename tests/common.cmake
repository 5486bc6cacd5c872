mc_test(test_common ${CMAKE_CURRENT_SOURCE_DIR}/test_common.c)
