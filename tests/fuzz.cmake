# Fuzz targets (docs/testing.md, "Fuzzing"). Each target tests/fuzz/fuzz_<t>.c gets
#  - fuzz_<t>_replay, built by every compiler: replays the committed seed corpus (tests/fuzz/corpus/<t>)
#    and the crash-regression corpus (tests/fuzz/regress/<t>) with deterministic mutations; a ctest;
#  - with -DMC_FUZZ=ON (clang only): fuzz_<t>_libfuzzer, a coverage-guided libFuzzer binary, and the
#    ctest fuzz_campaign_<t>, a short campaign (MC_FUZZ_CAMPAIGN_SECONDS, 10 s) that starts from the
#    seed corpus and keeps what it finds in <build>/fuzz/corpus/<t>, crashes in <build>/fuzz/crashes/<t>.
# Under MC_FUZZ the project's libraries are instrumented too (coverage and AddressSanitizer), so every
# binary of such a build links the AddressSanitizer runtime: use a build directory of its own.
option(MC_FUZZ "Build libFuzzer binaries of the fuzz targets and their short campaigns (clang)" OFF)
set(MC_FUZZ_CAMPAIGN_SECONDS 10 CACHE STRING "Length of each fuzz_campaign_<target> test")

set(MC_FUZZ_SRC ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
# replay mutations per input (the socket targets are slower per input)
set(MC_FUZZ_TARGETS master dataport desc ctrl http config auth snapshot rdma p2p witness dummy)
set(MC_FUZZ_MUTATIONS_master 200)
set(MC_FUZZ_MUTATIONS_desc 200)
set(MC_FUZZ_MUTATIONS_config 100)
set(MC_FUZZ_MUTATIONS_dataport 10)
set(MC_FUZZ_MUTATIONS_ctrl 10)
set(MC_FUZZ_MUTATIONS_http 5)
set(MC_FUZZ_MUTATIONS_auth 200)
set(MC_FUZZ_MUTATIONS_snapshot 200)
set(MC_FUZZ_MUTATIONS_rdma 200)
set(MC_FUZZ_MUTATIONS_p2p 200)
set(MC_FUZZ_MUTATIONS_witness 200)
set(MC_FUZZ_MUTATIONS_dummy 200)

if(MC_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "MC_FUZZ=ON needs clang (configure with CC=clang)")
  endif()
  foreach(layer common net proto meta te master client p2p)
    target_compile_options(mc_${layer}_o PRIVATE -fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer -g)
    target_link_options(mc_${layer} INTERFACE -fsanitize=address)
  endforeach()
  # (the shared libraries hold the same instrumented objects: whatever links them needs the runtime)
  target_link_options(mooncake_te PUBLIC -fsanitize=address)
  target_link_options(mooncake_store PUBLIC -fsanitize=address)
  target_link_options(mooncake_p2p PUBLIC -fsanitize=address)
endif()

# fuzz_all: every binary the fuzz_ ctests run (the fuzz stage of scripts/test.sh builds only these)
add_custom_target(fuzz_all)
foreach(t ${MC_FUZZ_TARGETS})
  set(srcs ${MC_FUZZ_SRC}/fuzz_${t}.c ${MC_FUZZ_SRC}/fuzz_common.c)
  add_executable(fuzz_${t}_replay ${srcs} ${MC_FUZZ_SRC}/replay.c)
  target_link_libraries(fuzz_${t}_replay PRIVATE mc_master mc_standalone mc_p2p m ${CMAKE_DL_LIBS})
  add_test(NAME fuzz_${t}_replay COMMAND fuzz_${t}_replay -m ${MC_FUZZ_MUTATIONS_${t}}
           ${MC_FUZZ_SRC}/corpus/${t} ${MC_FUZZ_SRC}/regress/${t})
  set_tests_properties(fuzz_${t}_replay PROPERTIES TIMEOUT 300 ENVIRONMENT "MC_LOG_LEVEL=ERROR")
  add_dependencies(fuzz_all fuzz_${t}_replay)
  if(MC_FUZZ)
    add_executable(fuzz_${t}_libfuzzer ${srcs})
    target_compile_options(fuzz_${t}_libfuzzer PRIVATE -fsanitize=fuzzer,address -fno-omit-frame-pointer -g)
    target_link_options(fuzz_${t}_libfuzzer PRIVATE -fsanitize=fuzzer,address)
    target_link_libraries(fuzz_${t}_libfuzzer PRIVATE mc_master mc_standalone mc_p2p m ${CMAKE_DL_LIBS})
    add_dependencies(fuzz_all fuzz_${t}_libfuzzer)
    set(work ${CMAKE_BINARY_DIR}/fuzz/corpus/${t})
    set(crashes ${CMAKE_BINARY_DIR}/fuzz/crashes/${t})
    file(MAKE_DIRECTORY ${work} ${crashes})
    set(dict)
    if(EXISTS ${MC_FUZZ_SRC}/${t}.dict)
      set(dict -dict=${MC_FUZZ_SRC}/${t}.dict)
    endif()
    add_test(NAME fuzz_campaign_${t}
             COMMAND fuzz_${t}_libfuzzer -max_total_time=${MC_FUZZ_CAMPAIGN_SECONDS} -timeout=20 -print_final_stats=1
                     ${dict} -artifact_prefix=${crashes}/ ${work} ${MC_FUZZ_SRC}/corpus/${t} ${MC_FUZZ_SRC}/regress/${t})
    set_tests_properties(fuzz_campaign_${t} PROPERTIES TIMEOUT 300 ENVIRONMENT "MC_LOG_LEVEL=ERROR")
  endif()
endforeach()

# The generator of the binary seed inputs (not a test): fuzz_seeds tests/fuzz/corpus
add_executable(fuzz_seeds ${MC_FUZZ_SRC}/fuzz_seeds.c)
target_link_libraries(fuzz_seeds PRIVATE mc_master mc_standalone)
