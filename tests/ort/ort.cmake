# ONNX Runtime (npm onnxruntime-node, tools/install-deps.sh test) through tools/ort/ort_run.js.
add_test(NAME ort_run_matches_numpy
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/ort/check_ort_run.py
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
