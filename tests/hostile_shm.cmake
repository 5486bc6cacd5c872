mc_test(test_hostile_shm ${CMAKE_CURRENT_SOURCE_DIR}/test_hostile_shm.c)
