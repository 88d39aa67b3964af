# Search start points in `gopt compare` / `gopt optimize` (--start, default best): searches never
# rank below the best baseline on three zoo models and every task, plus a GNMT training placement
# where everything on one device is over memory; `start` and `curve` in --json
# (check_compare_start.py); and --start errors give one line naming the flag. Uses cli_error and OD
# from cli.cmake (included first: the test files are included in name order).
add_test(NAME cli_compare_start COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_compare_start.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_compare_start PROPERTIES LABELS cli TIMEOUT 300)
cli_error(start_unknown "gopt compare: --start: start 'nope': not default, best, a baseline name or a readable decisions file"
          compare resnet50:depth=18 --task placement --cluster 2xV100 --start nope)
cli_error(start_no_file "gopt optimize: --start: start '/nonexistent/d.json': not default, best"
          optimize resnet50:depth=18 --task placement --cluster 2xV100 --method local --start /nonexistent/d.json)
cli_error(start_not_applicable "gopt optimize: --start: start 'xla' does not apply to the placement task"
          optimize resnet50:depth=18 --task placement --cluster 2xV100 --method local --start xla)
cli_error(start_bad_file "gopt optimize: --start: .*not_onnx.txt"
          optimize resnet50:depth=18 --task placement --cluster 2xV100 --method local --start ${OD}/not_onnx.txt)
