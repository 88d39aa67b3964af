# METIS's own stdout text never reaches gopt's stdout (tests/baselines/check_metis_quiet.py).
add_test(NAME baselines_metis_quiet COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_metis_quiet.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
