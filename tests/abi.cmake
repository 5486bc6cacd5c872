# The house's boundaries (docs/architecture.md): layers match folders and includes, the shared libraries
# export their public headers only, and a program of the public API alone links and runs against them.
add_test(NAME test_layers COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_layers.py ${CMAKE_SOURCE_DIR}
         ${CMAKE_BINARY_DIR}/layers.txt)
add_test(NAME test_exports COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.py ${CMAKE_SOURCE_DIR}
         ${CMAKE_BINARY_DIR})
# the checker itself: an include planted upward or sideways into any layer is reported
add_test(NAME test_layers_planted COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_layers.py --planted
         ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/layers.txt)
set_tests_properties(test_layers test_layers_planted test_exports PROPERTIES TIMEOUT 60)
# test_abi links the shared libraries only (not the static layers mc_test links)
add_executable(test_abi ${CMAKE_CURRENT_SOURCE_DIR}/test_abi.c)
target_link_libraries(test_abi PRIVATE mooncake_store mooncake_te)
target_include_directories(test_abi PRIVATE ${CMAKE_SOURCE_DIR}/tests)
add_test(NAME test_abi COMMAND test_abi)
set_tests_properties(test_abi PROPERTIES TIMEOUT 120 ENVIRONMENT "MC_TEST_BIN_DIR=${CMAKE_BINARY_DIR}/tools")
