mc_test(test_te_paths ${CMAKE_CURRENT_SOURCE_DIR}/test_te_paths.c)
