mc_test(test_te ${CMAKE_CURRENT_SOURCE_DIR}/test_te.c)
