# Search progress on stderr (check_progress.py): plain rate-limited lines in a log, a redrawn bar
# with the ETA on a (pseudo-)terminal, GOPT_PROGRESS=0 silent. About 6 s (two 2.5 s and one 1 s
# time-limited searches: the log prints every 2 s).
add_test(NAME cli_progress COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_progress.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_progress PROPERTIES LABELS cli TIMEOUT 60)
