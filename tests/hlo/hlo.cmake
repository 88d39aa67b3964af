# hlo.cmake: script tests of the HLO importer and exporter on the real modules in tests/hlo/data:
# instruction counts against an independent count of the text (tools/hlo/hlo_count.py), and the
# export -> re-import round trip (same instruction count and structural hash).
add_test(NAME hlo_import_real_modules
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/hlo/check_hlo.py ${GOPT_BIN}
                 ${CMAKE_SOURCE_DIR}/tests/hlo/data
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME hlo_roundtrip_real_modules
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/hlo/check_hlo.py ${GOPT_BIN}
                 ${CMAKE_SOURCE_DIR}/tests/hlo/data --roundtrip ${CMAKE_CURRENT_BINARY_DIR}/hlo_roundtrip
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

# Fuzz regressions and seeds of the HLO importer (fuzz/fuzz_hlo_import.c through the shared
# replay driver fuzz/replay_onnx.c), in every build, sanitizers included.
add_executable(replay_hlo ${CMAKE_SOURCE_DIR}/fuzz/replay_onnx.c ${CMAKE_SOURCE_DIR}/fuzz/fuzz_hlo_import.c)
target_link_libraries(replay_hlo PRIVATE gopt)
add_test(NAME hlo_fuzz_regressions COMMAND replay_hlo ${CMAKE_SOURCE_DIR}/fuzz/corpus_hlo
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(hlo_fuzz_regressions PROPERTIES FAIL_REGULAR_EXPRESSION "runtime error|Sanitizer")
add_test(NAME hlo_fuzz_seed_corpus COMMAND replay_hlo ${CMAKE_SOURCE_DIR}/fuzz/corpus_hlo "*.hlo"
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(hlo_fuzz_seed_corpus PROPERTIES FAIL_REGULAR_EXPRESSION "runtime error|Sanitizer")
add_test(NAME hlo_export_zoo_onnx
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/hlo/check_zoo_export.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# The default pipeline on every real module through the CLI: runs, re-imports with the reported
# instruction count, equal to an independent count of the text (each single pass, and output
# equality, are in test_passes_exec).
add_test(NAME hlo_passes_real_modules
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/hlo/check_passes.py ${GOPT_BIN}
                 ${CMAKE_SOURCE_DIR}/tests/hlo/data ${CMAKE_CURRENT_BINARY_DIR}/hlo_passes
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
