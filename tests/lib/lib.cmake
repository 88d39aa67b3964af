# lib.cmake: checks on the shared library itself: libgopt.so exports only gopt_* names (the
# version script src/gopt.map keeps internal helpers and the protobuf-c code local).
add_test(NAME lib_exports_only_gopt
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/check_exports.sh $<TARGET_FILE:gopt_shared>
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

# cmake --install into a temporary prefix, then an external C program built with only
# `pkg-config --cflags --libs gopt` (shared, and --static) loads a zoo model and must print the
# node count `gopt info` reports; the installed CLI, man page, policies and Python binding too.
add_test(NAME lib_install_pkgconfig
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/check_install.sh ${CMAKE_BINARY_DIR} ${GOPT_BIN}
                 ${CMAKE_SOURCE_DIR} ${PROJECT_VERSION}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(lib_install_pkgconfig PROPERTIES TIMEOUT 300 LABELS lib)
if(GOPT_SANITIZE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so OUTPUT_VARIABLE LIB_ASAN
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  set_tests_properties(lib_install_pkgconfig PROPERTIES ENVIRONMENT
                       "GOPT_TEST_CFLAGS=-fsanitize=address,undefined;GOPT_TEST_PY_PRELOAD=${LIB_ASAN}")
endif()
# a copy of the binary away from the source tree (an out-of-tree build's situation) finds the
# shipped policies, rules/rules.json and tools/ort/ort_run.js in the source tree it was built from
add_test(NAME lib_shipped_out_of_tree
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/check_shipped.sh ${GOPT_BIN} ${CMAKE_SOURCE_DIR})
set_tests_properties(lib_shipped_out_of_tree PROPERTIES TIMEOUT 120 LABELS lib)
add_test(NAME lib_version COMMAND ${GOPT_BIN} --version)
set_tests_properties(lib_version PROPERTIES PASS_REGULAR_EXPRESSION "^gopt ${PROJECT_VERSION}\n$")
