# Copy and move tasks end to end (docs/master.md, "Copy and move tasks"): a real master, peer clients in
# other processes executing the tasks, byte checks of every read.
mc_test(test_tasks ${CMAKE_CURRENT_SOURCE_DIR}/test_tasks.c)
target_link_libraries(test_tasks PRIVATE mc_client)
set_tests_properties(test_tasks PROPERTIES TIMEOUT 180)
if(TARGET mooncake_master)
  add_dependencies(test_tasks mooncake_master)
endif()
