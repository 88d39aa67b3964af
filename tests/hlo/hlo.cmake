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
