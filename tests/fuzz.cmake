# Fuzz targets: replayed over their corpus (plus deterministic mutations) in every test run. With clang,
# -DMC_FUZZ=ON also builds real libFuzzer binaries (fuzz_desc_libfuzzer, fuzz_rpc_libfuzzer).
foreach(target desc rpc)
  add_executable(fuzz_${target}_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${target}.c
                 ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay.c)
  target_link_libraries(fuzz_${target}_replay PRIVATE mooncake_te)
  add_test(NAME fuzz_${target}_replay COMMAND fuzz_${target}_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${target})
  set_tests_properties(fuzz_${target}_replay PROPERTIES ENVIRONMENT "MC_LOG_LEVEL=ERROR")
  if(MC_FUZZ)
    add_executable(fuzz_${target}_libfuzzer ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${target}.c)
    target_compile_options(fuzz_${target}_libfuzzer PRIVATE -fsanitize=fuzzer,address)
    target_link_options(fuzz_${target}_libfuzzer PRIVATE -fsanitize=fuzzer,address)
    target_link_libraries(fuzz_${target}_libfuzzer PRIVATE mooncake_te)
  endif()
endforeach()
