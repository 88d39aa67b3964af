# gopt rewrite on corpus and zoo models: verified, onnx.checker (full check) passes; Conv+BN folded
# with real weights; shipped rules.json verifies.
add_test(NAME rewrite_cli COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_rewrite_cli.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# rule generation at 2 ops (seconds): writes a rules file whose every rule passes `rules verify`
# (the executor re-checks each pattern rule numerically; exit 1 if any fails), with conv rules of
# each conv domain (3x3, 1x1, 1x3, grouped, scalar Mul, stride 2, dilation 2), Gemm,
# BatchNormalization and Reshape rules, proved by Z3.
add_test(NAME rewrite_rules_generate
         COMMAND sh -c "set -e; f=$(mktemp /tmp/gopt-rules-XXXXXX.json); \"$1\" rules generate -o \"$f\" --max-ops 2 | grep -Eq ' [1-9][0-9]+ verified .* 0 dropped \\(numeric\\)'; for p in genc3 genc1 genc13 gencg gencs geng gencst gencdl genbn genr genr4; do grep -q \"name\\\":\\\"$\{p\}_0000\\\".*\\\"proof\\\":\\\"z3\" \"$f\"; done; \"$1\" rules verify \"$f\" >/dev/null; rm -f \"$f\"" sh ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# generated BatchNormalization and Reshape rules of the shipped rules file (found by structure),
# applied by gopt rewrite on small models with weights, verified by the executor and ONNX Runtime.
add_test(NAME rewrite_rules_bn_reshape
         COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_rules_bn_reshape.py ${GOPT_BIN} ${CMAKE_SOURCE_DIR}/rules/rules.json
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# the rl agent (X-RLflow): training writes and resumes a policy; --method rl output verified like
# greedy's; corrupted/foreign policies and bad flags get one error line.
add_test(NAME rewrite_rl COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_rewrite_rl.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# --cluster host --costdb: ops profiled on demand into the database and cached; --measure's guard:
# a result measured slower than its input (test hook) is not written, the input is, with the reason.
add_test(NAME rewrite_measured COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_rewrite_measured.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# tools/onnx_torch_run.py (rewritten models on a PyTorch device) on CPU: PyTorch's outputs of input
# and rewrite agree and gopt's executor reproduces them; skipped (77) without PyTorch.
add_test(NAME rewrite_onnx_torch_run COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_onnx_torch_run.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(rewrite_onnx_torch_run PROPERTIES SKIP_RETURN_CODE 77)
