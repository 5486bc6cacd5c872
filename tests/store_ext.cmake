# The store's native additions used by the Python package (store.h), against the real master.
mc_test(test_store_ext ${CMAKE_CURRENT_SOURCE_DIR}/test_store_ext.c)
target_link_libraries(test_store_ext PRIVATE mc_client m)
set_tests_properties(test_store_ext PROPERTIES TIMEOUT 120)
if(TARGET mooncake_master)
  add_dependencies(test_store_ext mooncake_master)
endif()
