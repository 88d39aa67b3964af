# REGAL in gopt train / optimize / compare (tests/cli/check_regal.sh).
add_test(NAME cli_regal COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_regal.sh ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_regal PROPERTIES LABELS cli)
