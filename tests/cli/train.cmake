# `gopt train`: exact resume through the CLI and one-line errors for bad policy files and flags
# (tests/cli/check_train.sh).
add_test(NAME cli_train COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_train.sh ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_train PROPERTIES LABELS cli)
