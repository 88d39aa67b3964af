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

# Fuzz regressions: every fuzz/corpus_onnx/regress-* input (globbed at run time, so new ones count
# without a reconfigure) goes through the fuzz target's own entry point (fuzz/fuzz_onnx_import.c)
# via a plain driver, in every build, sanitizers included. Fails on a crash / sanitizer report /
# broken round trip (abort) and when no input matches; the _empty case checks the latter.
# onnx_fuzz_seed_corpus replays the whole seed corpus the same way.
add_executable(replay_onnx ${CMAKE_SOURCE_DIR}/fuzz/replay_onnx.c ${CMAKE_SOURCE_DIR}/fuzz/fuzz_onnx_import.c)
target_link_libraries(replay_onnx PRIVATE gopt)
add_test(NAME onnx_fuzz_regressions COMMAND replay_onnx ${CMAKE_SOURCE_DIR}/fuzz/corpus_onnx
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(onnx_fuzz_regressions PROPERTIES FAIL_REGULAR_EXPRESSION "runtime error|Sanitizer")
add_test(NAME onnx_fuzz_seed_corpus COMMAND replay_onnx ${CMAKE_SOURCE_DIR}/fuzz/corpus_onnx "*"
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(onnx_fuzz_seed_corpus PROPERTIES FAIL_REGULAR_EXPRESSION "runtime error|Sanitizer")
add_test(NAME onnx_fuzz_regressions_empty
         COMMAND sh -c "out=$(\"$0\" \"$1\" 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] && echo \"$out\" | grep -q 'no input matches'"
                 $<TARGET_FILE:replay_onnx> ${CMAKE_SOURCE_DIR}/tests/onnx/data
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

# tools/check_corpus.py exits 1 with a message when it compared nothing (here: the batch check on
# a corpus holding only a fixed-batch model)
add_test(NAME check_corpus_compared_nothing
         COMMAND sh -c "d=$(mktemp -d); cp \"$2\"/init_raw.onnx \"$d\"/; \
out=$(\"$1\" tools/check_corpus.py --gopt \"$0\" --corpus \"$d\" batch 2>&1); rc=$?; rm -rf \"$d\"; \
echo \"$out\"; [ $rc -eq 1 ] && echo \"$out\" | grep -q 'compared nothing'"
                 ${GOPT_BIN} ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/onnx/data
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
