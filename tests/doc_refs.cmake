# The repository explains itself (docs/testing.md, "Checking the docs' references"): no tracked file
# points at contract pages outside the repository, and every docs/ page and section a file cites exists.
# Skipped (77) when the source tree is not a git checkout.
add_test(NAME test_doc_refs COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_doc_refs.py ${CMAKE_SOURCE_DIR})
set_tests_properties(test_doc_refs PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)
