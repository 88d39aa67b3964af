# CLI tests: every bad input and bad flag gives one error line naming the file/node/flag and a
# non-zero exit, never a crash (tests/cli/expect_error.sh checks all of that); and the main
# commands work on corpus and zoo models.
set(EXPECT_ERROR ${CMAKE_CURRENT_LIST_DIR}/expect_error.sh)
set(OD ${CMAKE_SOURCE_DIR}/tests/onnx/data)
set(CD ${CMAKE_SOURCE_DIR}/tests/cli/data)
function(cli_error name regex)
  add_test(NAME cli_err_${name} COMMAND ${EXPECT_ERROR} "${regex}" ${GOPT_BIN} ${ARGN}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(cli_err_${name} PROPERTIES LABELS cli)
endfunction()
cli_error(empty_file "empty.onnx: empty file" info ${OD}/empty.onnx)
cli_error(truncated "truncated.onnx: not an ONNX model" info ${CD}/truncated.onnx)
cli_error(text_file "not_onnx.txt: not an ONNX model" info ${OD}/not_onnx.txt)
cli_error(png_file "not_onnx.png: not an ONNX model" info ${OD}/not_onnx.png)
cli_error(missing_file "nope.onnx: cannot open" info ${CD}/nope.onnx)
cli_error(unknown_op "opaque_novi.onnx: node 'foo' \\(op com.example::MyOp\\): no shape rule and no value_info" info ${OD}/opaque_novi.onnx)
cli_error(cyclic "cyclic.onnx: graph has a cycle through node" info ${OD}/cyclic.onnx)
cli_error(dangling "dangling.onnx: node 'adder' \\(op Add\\): input 'nope'" info ${OD}/dangling.onnx)
cli_error(shape_mismatch "shape_mismatch.onnx: node 'bad_matmul' \\(MatMul\\): inner dims differ" info ${CD}/shape_mismatch.onnx)
cli_error(opset6 "opset6.onnx: node 'r' \\(Add\\): not supported at opset 6" info ${OD}/opset6.onnx)
cli_error(dup_output "dup_output.onnx: node 'second'.*already produced" info ${OD}/dup_output.onnx)
cli_error(huge_dims "huge_dims.onnx: initializer 'w': invalid dims" info ${OD}/huge_dims.onnx)
cli_error(colon_op_type "regress-colon-op-type.onnx: node .adder.: invalid op type .i::." info ${CMAKE_SOURCE_DIR}/fuzz/corpus_onnx/regress-colon-op-type.onnx)
cli_error(unknown_flag "gopt info: unknown flag '--frobnicate'" info resnet50 --frobnicate)
cli_error(bad_batch "gopt info: --batch: expected an integer" info resnet50 --batch abc)
cli_error(zero_batch "gopt info: --batch: expected an integer" info resnet50 --batch 0)
cli_error(missing_batch "gopt info: --batch: expected an integer" info resnet50 --batch)
cli_error(no_symbolic_batch "resnet50: --batch: the model has no symbolic batch dimension" info resnet50 --batch 4)
cli_error(no_model "gopt info: missing MODEL" info)
cli_error(two_models "gopt info: more than one MODEL" info resnet50 bert)
cli_error(unknown_zoo "frobnet" info frobnet)
cli_error(unknown_knob "resnet50.*'wings'" info resnet50:wings=2)
cli_error(bad_knob "gnmt.*steps" info gnmt:steps=abc)
cli_error(unknown_command "gopt: unknown command 'frob'" frob)
cli_error(convert_no_output "gopt convert: missing -o" convert resnet50)
cli_error(convert_bad_dir "/nonexistent/dir/x.onnx" convert resnet50 -o /nonexistent/dir/x.onnx)
cli_error(dot_unknown_flag "gopt dot: unknown flag '-x'" dot resnet50 -x)

# Working commands (outputs checked by the scripted tests in tests/corpus and tests/sim).
add_test(NAME cli_zoo_builds_all COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_cli.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_zoo_builds_all PROPERTIES LABELS cli TIMEOUT 300)

# external data through a symbolic link: refused when it leaves the model's directory (one error
# line naming the file, gopt run and gopt info), loaded when it stays inside
add_test(NAME cli_ext_data_symlink COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_ext_symlink.sh ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_ext_data_symlink PROPERTIES LABELS cli)
