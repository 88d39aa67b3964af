# Executor tests (label exec): every op case in tests/exec/data/ops runs with `gopt run --check`
# against numpy/PyTorch references; every corpus model is exported with weights by
# tools/make_testdata.py into the build folder (fixture exec_corpus_data, needs Debian torch) and
# must match PyTorch's outputs (rtol 1e-3, atol 1e-4); bad inputs give one clear error line;
# tests/exec/check_exec_cli.sh covers outputs, NaN reports, orders, fusion and the cost database.
set(EXEC_OPS ${CMAKE_SOURCE_DIR}/tests/exec/data/ops)
set(EXEC_DATA ${CMAKE_BINARY_DIR}/exec-testdata)

file(GLOB exec_op_cases LIST_DIRECTORIES true ${EXEC_OPS}/*)
foreach(dir ${exec_op_cases})
  if(IS_DIRECTORY ${dir}/test_data_set_0)
    get_filename_component(case ${dir} NAME)
    add_test(NAME exec_op_${case} COMMAND ${GOPT_BIN} run ${dir}/model.onnx --check ${dir} --threads 2
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(exec_op_${case} PROPERTIES LABELS exec TIMEOUT 60)
  endif()
endforeach()
add_test(NAME exec_op_shape_chain_nofold
         COMMAND ${GOPT_BIN} run ${EXEC_OPS}/shape_chain/model.onnx --check ${EXEC_OPS}/shape_chain --no-fold
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_op_shape_chain_nofold PROPERTIES LABELS exec TIMEOUT 60)
add_test(NAME exec_op_chain_fused
         COMMAND ${GOPT_BIN} run ${EXEC_OPS}/chain/model.onnx --check ${EXEC_OPS}/chain --fusion ${EXEC_OPS}/chain/fusion.json
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_op_chain_fused PROPERTIES LABELS exec TIMEOUT 60)
# a given order that runs the If after the producer of what its branches read
add_test(NAME exec_op_If_outer_order
         COMMAND ${GOPT_BIN} run ${EXEC_OPS}/If_outer/model.onnx --check ${EXEC_OPS}/If_outer --order ${EXEC_OPS}/If_outer/order_ok.json
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_op_If_outer_order PROPERTIES LABELS exec TIMEOUT 60)

# bad input: one error line naming what is wrong, non-zero exit, no crash
set(EXPECT_ERROR_SH ${CMAKE_SOURCE_DIR}/tests/cli/expect_error.sh)
function(exec_error name regex)
  add_test(NAME exec_err_${name} COMMAND ${EXPECT_ERROR_SH} "${regex}" ${GOPT_BIN} run ${ARGN}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(exec_err_${name} PROPERTIES LABELS exec TIMEOUT 60)
endfunction()
exec_error(unsupported_op "node 'multinomial_0' \\(Multinomial\\): op type not supported by the executor"
           ${EXEC_OPS}/_errors/unsupported.onnx)
exec_error(if_bad_shape "node 'if_bad' \\(If\\): output 'y': the sub-graph gives FLOAT\\[3\\], the graph declares FLOAT\\[2\\]"
           ${EXEC_OPS}/_errors/if_bad_shape.onnx)
exec_error(order_outer_read "order: node 'if' runs before 'square', which produces 'sq' that its sub-graphs read"
           ${EXEC_OPS}/If_outer/model.onnx --order ${EXEC_OPS}/If_outer/order_bad.json)
exec_error(missing_input "--inputs: '.*nope.pb' is not a file or folder" ${EXEC_OPS}/Relu/model.onnx
           --inputs ${EXEC_OPS}/nope.pb)
exec_error(wrong_shape "input 'x': expected FLOAT\\[2,3,4,5\\], got FLOAT\\[4,5\\]" ${EXEC_OPS}/Relu/model.onnx
           --inputs ${EXEC_OPS}/Where/test_data_set_0/input_1.pb)
exec_error(wrong_dtype "input 'x': expected FLOAT\\[2,3,4,5\\], got BOOL\\[4,5\\]" ${EXEC_OPS}/Relu/model.onnx
           --inputs ${EXEC_OPS}/Where/test_data_set_0/input_0.pb)
exec_error(input_count "the model has 1 inputs, 2 tensor files were given" ${EXEC_OPS}/Relu/model.onnx
           --inputs ${EXEC_OPS}/Add/test_data_set_0)
exec_error(not_a_tensor "model.onnx: (not an ONNX TensorProto|data type|raw_data|no data)" ${EXEC_OPS}/Relu/model.onnx
           --inputs ${EXEC_OPS}/Relu/model.onnx)
exec_error(bad_order "order: node 'a2' runs before 'a1', which produces its input 'a1'"
           ${EXEC_OPS}/branches/model.onnx --order ${EXEC_OPS}/branches/order_bad.json)
exec_error(fusion_nonelem "node 'mm' \\(MatMul\\): fusion group 0: only float elementwise"
           ${EXEC_OPS}/chain/model.onnx --fusion ${EXEC_OPS}/chain/fusion_bad.json)
exec_error(check_not_dir "--check .*: not a folder" ${EXEC_OPS}/Relu/model.onnx --check ${EXEC_OPS}/nope)
exec_error(bad_layouts "--layouts: expected auto or plain, got .nchw." ${EXEC_OPS}/Relu/model.onnx --layouts nchw)
exec_error(bad_steps "--steps: expected isolated or context, got .warm." ${EXEC_OPS}/Relu/model.onnx --profile --steps warm)
exec_error(input_rank "input .src.: expected INT64\\[batch,12\\], got FLOAT\\[2,3,4\\]" corpus/lstm_seq2seq.onnx
           --inputs ${EXEC_OPS}/Shape/test_data_set_0/input_0.pb,${EXEC_OPS}/Shape/test_data_set_0/input_0.pb)
# malformed Scan axes / ranks and transformer-op inputs whose shapes do not fit each other
foreach(case
    "scan_input_axis|scan_input_axes value 2 is out of range for scan input 0 of rank 2"
    "scan_output_axis|scan_output_axes value 3 is out of range for scan output 0 of rank 2"
    "scan_rank_overflow|scan output 0 would have rank 17, beyond the maximum 16"
    "attn_head_size|\\(Attention\\): K/V heads or head size do not match Q's"
    "attn_kv_batch|\\(Attention\\): K/V batch \\(1, 1\\) or sequence \\(3, 3\\) do not match Q's batch 2"
    "attn_mask_dim|\\(Attention\\): attn_mask dim 0 is 2, neither 1 nor 3"
    "attn_mask_rank|\\(Attention\\): attn_mask must be 1-D to 4-D, it is 5-D"
    "attn_nonpad|\\(Attention\\): nonpad_kv_seqlen has 2 values, neither 1 nor the batch 3"
    "attn_past_heads|\\(Attention\\): past_key must be \\[B, kv heads, past, head size\\]"
    "rotary_sin_cache|\\(RotaryEmbedding\\): cos_cache and sin_cache must have one shape"
    "rotary_position_ids|\\(RotaryEmbedding\\): position_ids has 2 values, expected 3"
    "linattn_k_batch|\\(LinearAttention\\): k \\[B, T, kv heads \\* 4\\].* does not match q"
    "causalconv_past|\\(CausalConvWithState\\): needs kernel size >= 1, bias \\[2\\] and past_state \\[1, 2, 2\\]")
  string(FIND "${case}" "|" bar)
  string(SUBSTRING "${case}" 0 ${bar} name)
  math(EXPR bar "${bar} + 1")
  string(SUBSTRING "${case}" ${bar} -1 regex)
  exec_error(${name} "node '${name}' .*${regex}" ${EXEC_OPS}/_errors/${name}.onnx)
endforeach()

add_test(NAME exec_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/exec/check_exec_cli.sh ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_cli PROPERTIES LABELS exec TIMEOUT 120)

# corpus models with weights vs PyTorch
add_test(NAME exec_corpus_data
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tools/make_testdata.py corpus --out ${EXEC_DATA}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_corpus_data PROPERTIES LABELS exec TIMEOUT 900 FIXTURES_SETUP exec_corpus)
foreach(m resnet18 mobilenet_v2 squeezenet1_1 densenet121 efficientnet_b0 inception_v3
          shufflenet_v2_x1_0 vgg11 lraspp_mobilenet_v3_large lstm_seq2seq bert_tiny gpt2_tiny wavenet swin_t)
  add_test(NAME exec_corpus_${m} COMMAND ${GOPT_BIN} run ${EXEC_DATA}/${m}/model.onnx --check ${EXEC_DATA}/${m}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(exec_corpus_${m} PROPERTIES LABELS exec TIMEOUT 300 FIXTURES_REQUIRED exec_corpus)
endforeach()
# shape subgraphs executed as integer ops instead of folded, and automatic fusion, on the
# models with the most shape computation and elementwise chains
foreach(m gpt2_tiny bert_tiny wavenet shufflenet_v2_x1_0)
  add_test(NAME exec_corpus_${m}_nofold_fused
           COMMAND ${GOPT_BIN} run ${EXEC_DATA}/${m}/model.onnx --check ${EXEC_DATA}/${m} --no-fold --fusion auto
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(exec_corpus_${m}_nofold_fused PROPERTIES LABELS exec TIMEOUT 300 FIXTURES_REQUIRED exec_corpus)
endforeach()

# the layout-assignment pass off (--layouts plain: every conv reorders around itself, no post-ops)
# on the CNNs it changes most, against PyTorch like the default (auto) runs above
foreach(m resnet18 mobilenet_v2 efficientnet_b0)
  add_test(NAME exec_corpus_${m}_plain
           COMMAND ${GOPT_BIN} run ${EXEC_DATA}/${m}/model.onnx --check ${EXEC_DATA}/${m} --layouts plain
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(exec_corpus_${m}_plain PROPERTIES LABELS exec TIMEOUT 300 FIXTURES_REQUIRED exec_corpus)
endforeach()
# every post-op kind and kept layout on a small CNN against PyTorch in both modes; auto's outputs
# equal plain's on the corpus CNNs, and the activation reorders drop on mobilenet_v2
add_test(NAME exec_layouts
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/exec/check_layouts.py ${GOPT_BIN} ${EXEC_DATA}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_layouts PROPERTIES LABELS exec TIMEOUT 300 FIXTURES_REQUIRED exec_corpus)

# a GPT-2-small-sized model (the zoo's gpt2 at 32 tokens, random weights written by the test:
# 471 MiB of MatMul weights, beyond the 256 MiB cap on packed copies that once refused it) runs
# under --layouts auto with every matmul chain applied and equals --layouts plain and ONNX Runtime
add_test(NAME exec_gpt2_small COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/exec/check_gpt2_small.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_gpt2_small PROPERTIES LABELS exec TIMEOUT 300)
# peak memory of `gopt run gnmt:batch=1`: each shared weight packed once, RSS under the bound the
# script states. Not under the sanitizers: there the RSS measures ASan's shadow memory and
# quarantine rather than the executor, and the 12007-step run is too slow for CI.
if(NOT GOPT_SANITIZE)
  add_test(NAME exec_gnmt_rss COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/exec/check_gnmt_rss.py ${GOPT_BIN}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(exec_gnmt_rss PROPERTIES LABELS exec TIMEOUT 300 RUN_SERIAL ON)
endif()

# --check compares every dtype the executor produces (equal passes, one changed element fails,
# 64-bit integers exactly) and stops with one error line on a dtype it cannot compare
add_test(NAME exec_check_dtypes COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/exec/check_dtypes.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_check_dtypes PROPERTIES LABELS exec TIMEOUT 120)

# ONNX backend node tests of onnx v1.22.0 (1,765 one-op models with reference outputs, from
# ../shared/onnx-node-tests-v1.22.0.tar.gz), unpacked into the build folder by the fixture and run
# with `gopt run --check` in 16 interleaved shards (so that ctest -j runs them in parallel, and each
# stays quick under ASan); each shard prints its pass count. A failure not listed in
# tests/exec/node_excluded.txt (with its reason) fails the shard; an excluded test that passes is
# reported so the list stays honest.
set(EXEC_NODE ${CMAKE_BINARY_DIR}/onnx-node-tests)
set(EXEC_NODE_ARCHIVE ${CMAKE_SOURCE_DIR}/../shared/onnx-node-tests-v1.22.0.tar.gz CACHE FILEPATH
    "the onnx node tests archive that the exec_node_tests shards run")
set(EXEC_NODE_SHARDS 16)
add_test(NAME exec_node_tests_data
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/exec/node_tests.py extract ${EXEC_NODE_ARCHIVE} ${EXEC_NODE})
set_tests_properties(exec_node_tests_data PROPERTIES LABELS exec TIMEOUT 300 FIXTURES_SETUP exec_node)
math(EXPR last_shard "${EXEC_NODE_SHARDS} - 1")
foreach(i RANGE ${last_shard})
  add_test(NAME exec_node_tests_${i}
           COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/exec/node_tests.py run ${GOPT_BIN} ${EXEC_NODE}
                   ${CMAKE_SOURCE_DIR}/tests/exec/node_excluded.txt --jobs 1 --shard ${i}/${EXEC_NODE_SHARDS})
  set_tests_properties(exec_node_tests_${i} PROPERTIES LABELS exec TIMEOUT 300 FIXTURES_REQUIRED exec_node)
endforeach()

# ONNX Runtime as a second, independent oracle (beside PyTorch) on corpus models of different
# kinds: CNN, attention with masks, recurrent, windowed attention (tools/ort/ort_compare.py)
add_test(NAME exec_ort_oracle
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tools/ort/ort_compare.py check ${GOPT_BIN}
                 ${EXEC_DATA}/resnet18 ${EXEC_DATA}/mobilenet_v2 ${EXEC_DATA}/efficientnet_b0 ${EXEC_DATA}/bert_tiny ${EXEC_DATA}/gpt2_tiny
                 ${EXEC_DATA}/lstm_seq2seq ${EXEC_DATA}/swin_t
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_ort_oracle PROPERTIES LABELS exec TIMEOUT 300 FIXTURES_REQUIRED exec_corpus)

# the benchmark's interleaved timing (bench/exec/pair_time.py) end to end on one op case: two gopt
# variants and ONNX Runtime each answer every round; tests/exec/check_pair_time.py checks the JSON
add_test(NAME exec_pair_time
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/exec/check_pair_time.py ${GOPT_BIN}
                 ${CMAKE_SOURCE_DIR}/tests/exec/data/ops/Conv
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_pair_time PROPERTIES LABELS exec TIMEOUT 120)

# every fusion decision gopt makes for this CPU runs (issue 29): optimize --task fusion --cluster
# host with go, local, xla and tvm, then run --fusion, against the unfused run (same seed) on four
# corpus models of different kinds (conv + swish, CNN, attention, dilated conv with pads); the
# whole corpus is `tools/check_fusion_runs.py build/bin/gopt` (docs/TASKS.md)
add_test(NAME exec_fusion_decisions
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tools/check_fusion_runs.py ${GOPT_BIN}
                 --models squeezenet1_1,efficientnet_b0,bert_tiny,wavenet --budget 50
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_fusion_decisions PROPERTIES LABELS exec TIMEOUT 300)
# the layout pass's own Concat -> BatchNorm -> Relu (densenet121: 62) and Pad -> AveragePool
# (inception_v3: 9) pairings are groups of the decisions (so the simulator prices each as the
# executor's one step); every decision runs, under the layout pass and under --layouts plain (where
# only a group makes the pair)
add_test(NAME exec_fusion_decisions_dense
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tools/check_fusion_runs.py ${GOPT_BIN}
                 --models densenet121,inception_v3 --methods xla,go --budget 20
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_fusion_decisions_dense PROPERTIES LABELS exec TIMEOUT 300)
add_test(NAME exec_fusion_decisions_plain
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tools/check_fusion_runs.py ${GOPT_BIN}
                 --models densenet121,inception_v3 --methods go --budget 20 --layouts plain
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_fusion_decisions_plain PROPERTIES LABELS exec TIMEOUT 300)

# a modern LLM decoder block (opset-23 RMSNormalization, RotaryEmbedding, Attention with causal
# GQA and a KV cache; random weights built with onnx.helper) equals ONNX Runtime on every output
add_test(NAME exec_llm_block
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/exec/check_llm_block.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_llm_block PROPERTIES LABELS exec TIMEOUT 120)

# the DenseNet patterns once more with oneDNN limited to AVX2, whose convs keep nChw8c (blocked)
# activations: the Concat -> BatchNorm chain's blocked path (test_exec_dense.c)
add_test(NAME test_exec_dense_avx2 COMMAND test_exec_dense WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_exec_dense_avx2 PROPERTIES LABELS exec ENVIRONMENT ONEDNN_MAX_CPU_ISA=AVX2)
