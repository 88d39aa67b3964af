# MPI (docs/SCALING.md), when the CLI is built with it and mpirun exists (tools/install-deps.sh
# installs openmpi-bin in the test set): distributed training is bitwise the single-process run
# with --rollout-groups P, resume works under mpirun, errors end the job with one line from rank
# 0 (check_mpi_train.sh); distributed search is bitwise the one-process search (islands keep the
# global budget) (check_mpi_search.py); Ctrl-C on mpirun returns the best so far (check_mpi_sigint.sh).
find_program(GOPT_MPIRUN NAMES mpirun)
if(GOPT_MPI_ON AND GOPT_MPIRUN)
  add_test(NAME mpi_train COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_mpi_train.sh ${GOPT_BIN} ${GOPT_MPIRUN}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME mpi_search COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_mpi_search.py ${GOPT_BIN} ${GOPT_MPIRUN} 3
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME mpi_sigint COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_mpi_sigint.sh ${GOPT_BIN} ${GOPT_MPIRUN}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # Each test gets its own Open MPI session directory and the three never overlap: concurrent
  # mpiruns sharing /tmp's session directory failed once in CI ("orte_session_dir failed").
  foreach(t mpi_train mpi_search mpi_sigint)
    file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/mpi-tmp/${t})
    set_tests_properties(${t} PROPERTIES LABELS mpi RESOURCE_LOCK gopt_mpi
                         ENVIRONMENT "GOPT_HISTORY=0;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;ASAN_OPTIONS=detect_leaks=0;OMPI_MCA_orte_tmpdir_base=${CMAKE_BINARY_DIR}/mpi-tmp/${t}")
  endforeach()
endif()
