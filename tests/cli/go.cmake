# The learned method go in gopt optimize / compare (tests/cli/check_go.sh).
add_test(NAME cli_go COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_go.sh ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_go PROPERTIES LABELS cli)
