mc_test(test_auth ${CMAKE_CURRENT_SOURCE_DIR}/test_auth.c)
