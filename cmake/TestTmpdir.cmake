# partition_give_tests_their_own_tmpdir(): every test defined so far in the
# calling directory gets TMPDIR=<its own directory under the build>.
#
# Why: OpenMPI 4 (Debian 12's 4.1.4) creates its per-node session
# directory, ompi.<host>.<uid>, under TMPDIR as a job starts and removes it
# as the job ends. Two jobs of `ctest -j` that start and end at once in one
# TMPDIR race on it: "A call to mkdir was unable to create the desired
# directory ... File exists", then orte_init fails and so does the test.
# test/lit.cfg.py does the same for every mpirun of the lit suite.
function(partition_give_tests_their_own_tmpdir)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/tmp/${test})
    file(MAKE_DIRECTORY ${dir})
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT TMPDIR=${dir})
  endforeach()
endfunction()
