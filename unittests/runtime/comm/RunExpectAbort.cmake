# Runs PROGRAM MODE under MPIEXEC with NP ranks and passes only if the job
# exits non-zero within MAX_SECONDS and its output matches EXPECT (a regular
# expression; no semicolons, they would split the argument) and, with
# REJECT, does not match that one.
#   cmake -DMPIEXEC=... -DNP_FLAG=-n -DNP=4 -DPROGRAM=... -DMODE=...
#         -DEXPECT=... [-DREJECT=...] -DMAX_SECONDS=... -P RunExpectAbort.cmake
string(TIMESTAMP start "%s" UTC)
execute_process(
  COMMAND ${MPIEXEC} ${NP_FLAG} ${NP} --oversubscribe ${PROGRAM} ${MODE}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out
  TIMEOUT 60
)
string(TIMESTAMP end "%s" UTC)
math(EXPR elapsed "${end} - ${start}")
message("${out}")
message("exit: ${rc}; ${elapsed} s")
if(rc STREQUAL "0")
  message(FATAL_ERROR "expected a non-zero exit")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "expected the output to match: ${EXPECT}")
endif()
if(DEFINED REJECT AND out MATCHES "${REJECT}")
  message(FATAL_ERROR "expected the output not to match: ${REJECT}")
endif()
if(elapsed GREATER MAX_SECONDS)
  message(FATAL_ERROR "took ${elapsed} s, more than ${MAX_SECONDS} s")
endif()
