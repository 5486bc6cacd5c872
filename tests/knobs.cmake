# The environment variables (README, "Environment variables"): the README's table is generated from
# src/common/knobs.h, and every variable the code reads by name is listed there (tests/check_knobs.py).
add_test(NAME test_knobs_doc COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_knobs.py ${CMAKE_SOURCE_DIR}
         $<TARGET_FILE:mooncake>)
set_tests_properties(test_knobs_doc PROPERTIES TIMEOUT 60)
