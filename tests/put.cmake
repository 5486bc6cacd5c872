# Write extents (one-round-trip puts): TLSF carve units, the master's extent RPCs against real master
# processes, and the store client's fast put path against a real master.
foreach(t test_master_extents)
  mc_test(${t} ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
  target_link_libraries(${t} PRIVATE mc_master m)
  add_dependencies(${t} mooncake_master)
  set_tests_properties(${t} PROPERTIES TIMEOUT 120)
endforeach()
mc_test(test_store_extents ${CMAKE_CURRENT_SOURCE_DIR}/test_store_extents.c)
target_link_libraries(test_store_extents PRIVATE mc_client)
add_dependencies(test_store_extents mooncake_master)
set_tests_properties(test_store_extents PROPERTIES TIMEOUT 120)
