# The run history and the SQLite cost database through the CLI (check_history.py): records of
# optimize and compare, --no-history / GOPT_HISTORY=0, XDG_DATA_HOME, gopt history MODEL,
# --start history, a corrupted history file, gopt costdb import/export. The library side
# (concurrent writers, locked database) is tests/cost/test_costdb_sqlite.c.
add_test(NAME cli_history COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_history.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_history PROPERTIES LABELS cli TIMEOUT 120)
