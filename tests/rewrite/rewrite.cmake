# gopt rewrite on corpus and zoo models: verified, onnx.checker (full check) passes; Conv+BN folded
# with real weights; shipped rules.json verifies.
add_test(NAME rewrite_cli COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_rewrite_cli.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
