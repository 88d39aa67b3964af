# gopt rewrite on corpus and zoo models: verified, onnx.checker (full check) passes; Conv+BN folded
# with real weights; shipped rules.json verifies.
add_test(NAME rewrite_cli COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_rewrite_cli.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# rule generation at 2 ops (seconds): writes a rules file whose every rule passes `rules verify`
# (the executor re-checks each pattern rule numerically; exit 1 if any fails).
add_test(NAME rewrite_rules_generate
         COMMAND sh -c "set -e; f=$(mktemp /tmp/gopt-rules-XXXXXX.json); \"$1\" rules generate -o \"$f\" --max-ops 2 | grep -Eq ' [1-9][0-9]+ verified .* 0 dropped \\(numeric\\)'; \"$1\" rules verify \"$f\" >/dev/null; rm -f \"$f\"" sh ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# the rl agent (X-RLflow): training writes and resumes a policy; --method rl output verified like
# greedy's; corrupted/foreign policies and bad flags get one error line.
add_test(NAME rewrite_rl COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_rewrite_rl.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
