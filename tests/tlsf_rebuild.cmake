# Rebuilding a segment's TLSF allocator from reported ranges (mc_tlsf_reserve; docs/ha.md, "Rebuild").
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/test_tlsf_rebuild.c)
  mc_test(test_tlsf_rebuild ${CMAKE_CURRENT_SOURCE_DIR}/test_tlsf_rebuild.c)
  target_link_libraries(test_tlsf_rebuild PRIVATE mc_master m)
  set_tests_properties(test_tlsf_rebuild PROPERTIES TIMEOUT 120)
endif()
