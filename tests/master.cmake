# Master tests: in-process units (allocator, configuration, dispatcher) and black-box tests against the
# real mooncake_master binary (started from MC_TEST_BIN_DIR on free ports).
foreach(t test_master_unit test_master test_master_evict test_master_live test_master_flags test_master_hidx
    test_master_placement)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
    mc_test(${t} ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
    target_link_libraries(${t} PRIVATE mc_master m)
    add_dependencies(${t} mooncake_master)
    set_tests_properties(${t} PROPERTIES TIMEOUT 120)
  endif()
endforeach()
