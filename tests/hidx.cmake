# The holder-index feed of the master (src/master_core/holder_feed.c): tests/test_hidx.c
mc_test(test_hidx ${CMAKE_CURRENT_SOURCE_DIR}/test_hidx.c)
target_link_libraries(test_hidx PRIVATE mc_master)
