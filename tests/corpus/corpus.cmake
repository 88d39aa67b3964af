# Corpus checks: tools/check_corpus.py compares `gopt info` / `gopt convert` on every model in
# corpus/ against onnx (shape inference, initializers, checker) and an independent FLOP count.
# One ctest per check kind; see docs/CORPUS.md.
foreach(kind shapes params flops roundtrip batch)
  add_test(NAME corpus_${kind}
           COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tools/check_corpus.py --gopt ${GOPT_BIN} ${kind}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(corpus_${kind} PROPERTIES LABELS corpus TIMEOUT 600)
endforeach()
