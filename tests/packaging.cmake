# Packaging (docs/packaging.md): the build installed into a temporary prefix gives the programs on PATH and
# their man pages, pkg-config and CMake package files that build real programs, sd_notify readiness of the
# daemons and systemd units that pass systemd-analyze (tests/test_packaging.py). Not in sanitizer or fuzz
# builds, which are not for installing (no man pages there). `pip install .` is tests/python/test_install.py.
if(MC_SANITIZE OR MC_TSAN OR MC_FUZZ)
  return()
endif()
add_test(NAME test_packaging COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_packaging.py ${CMAKE_SOURCE_DIR}
         ${CMAKE_BINARY_DIR})
set_tests_properties(test_packaging PROPERTIES TIMEOUT 300)
