# onnx.cmake: script tests of ONNX export checked by onnx itself. test_onnx_roundtrip --export writes
# every fixture, exported by gopt, into the build tree (fixture setup); check_exported.py then runs
# onnx.checker and compares each export with its original fixture as onnx reads them.
set(GOPT_ONNX_EXPORT_DIR ${CMAKE_CURRENT_BINARY_DIR}/onnx_exported)
add_test(NAME onnx_export_fixtures
         COMMAND test_onnx_roundtrip --export ${GOPT_ONNX_EXPORT_DIR}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(onnx_export_fixtures PROPERTIES FIXTURES_SETUP onnx_exported)
add_test(NAME onnx_checker_exported
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/onnx/check_exported.py ${GOPT_ONNX_EXPORT_DIR}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(onnx_checker_exported PROPERTIES FIXTURES_REQUIRED onnx_exported)
