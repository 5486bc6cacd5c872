mc_test(test_common ${CMAKE_CURRENT_SOURCE_DIR}/test_common.c)
target_link_libraries(test_common PRIVATE mc_proto) # the store error tables
