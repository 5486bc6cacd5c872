# Tenants at the HTTP metadata server (docs/transfer-engine.md, "Metadata"): a key belongs to the realm
# that created it; a tenant changes only its own.
mc_test(test_tenant_meta ${CMAKE_CURRENT_SOURCE_DIR}/test_tenant_meta.c)
add_dependencies(test_tenant_meta mooncake_http_metadata_server)
