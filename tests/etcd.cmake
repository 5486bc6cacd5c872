# The etcd v3 client (src/meta/etcd.h) against real etcd processes (a single node and a 3-member
# cluster) and a fake, hostile HTTP server.
mc_test(test_etcd ${CMAKE_CURRENT_SOURCE_DIR}/test_etcd.c)
set_tests_properties(test_etcd PROPERTIES TIMEOUT 120)
