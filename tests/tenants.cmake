# Tenant secrets (docs/security.md, "Tenants"): a tenant's objects, keys and ports stay in its realm.
mc_test(test_tenants ${CMAKE_CURRENT_SOURCE_DIR}/test_tenants.c)
target_link_libraries(test_tenants PRIVATE mc_client)
if(TARGET mooncake_master)
  add_dependencies(test_tenants mooncake_master)
endif()
set_tests_properties(test_tenants PROPERTIES TIMEOUT 180)
