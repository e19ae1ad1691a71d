# Runs one libFuzzer binary for SECONDS on a scratch copy of its seed corpus (SEEDS), so new
# inputs and crash artifacts land under WORKDIR and never in the source tree.
# cmake -DFUZZER=… -DSEEDS=… -DWORKDIR=… -DSECONDS=… [-DDICT=…] -P run_fuzzer.cmake
foreach(var FUZZER WORKDIR SECONDS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzzer.cmake: -D${var}= is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORKDIR}/corpus")
file(MAKE_DIRECTORY "${WORKDIR}/corpus" "${WORKDIR}/artifacts")
if(DEFINED SEEDS AND IS_DIRECTORY "${SEEDS}")
  file(GLOB seeds "${SEEDS}/*")
  if(seeds)
    file(COPY ${seeds} DESTINATION "${WORKDIR}/corpus")
  endif()
endif()

set(dict_option)
if(DEFINED DICT AND EXISTS "${DICT}")
  set(dict_option "-dict=${DICT}")
endif()

execute_process(
  COMMAND "${FUZZER}" -max_total_time=${SECONDS} -print_final_stats=1 ${dict_option}
          -artifact_prefix=${WORKDIR}/artifacts/ "${WORKDIR}/corpus"
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${result}); reproducers in ${WORKDIR}/artifacts/")
endif()
