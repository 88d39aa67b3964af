# Local advantage commands (gopt collect, gopt train --method localadv, --method guided/khop):
# end to end, exact resume, one-line errors (tests/cli/check_localadv.sh).
add_test(NAME cli_localadv COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_localadv.sh ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_localadv PROPERTIES LABELS cli)
