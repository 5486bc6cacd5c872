# Deferred replies of the master RPC server (long polls): tests/test_mrpc_defer.c
mc_test(test_mrpc_defer ${CMAKE_CURRENT_SOURCE_DIR}/test_mrpc_defer.c)
