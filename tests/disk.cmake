mc_test(test_disk ${CMAKE_CURRENT_SOURCE_DIR}/test_disk.c)
target_link_libraries(test_disk PRIVATE mc_disk)
