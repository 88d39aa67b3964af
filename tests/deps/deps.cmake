# Dependency sets (tools/install-deps.sh): everything the CMake configuration looks for comes
# from the `build` set, and the script's --print / error behaviour.
add_test(NAME deps_build_set
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/deps/check_build_set.py ${CMAKE_BINARY_DIR}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME deps_print_unknown_set
         COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/expect_error.sh "unknown dependency set 'nope'"
                 ${CMAKE_SOURCE_DIR}/tools/install-deps.sh --print nope
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
