# Store client tests: unit-level (a scripted stand-in master) and black-box against the real master; the
# process lifecycle of store clients and engines (test_lifecycle: registry, exit, signals).
foreach(t test_store_unit test_store test_store_xproc test_lifecycle)
  mc_test(${t} ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
  target_link_libraries(${t} PRIVATE mc_client)
  set_tests_properties(${t} PROPERTIES TIMEOUT 120)
  if(TARGET mooncake_master AND NOT t STREQUAL "test_store_unit")
    add_dependencies(${t} mooncake_master)
  endif()
endforeach()
