# Measured-GPU calibration (gopt calibrate --gpu, tools/gpu_profile.py): one-line errors for bad
# measurement files and flags; the shipped H100 preset equals a fresh calibration on the committed
# data (../shared/gpu/h100_corpus.json; skipped when absent); gpu_profile.py's --help, argument
# checks and a CPU --dry-run whose file gopt calibrate --gpu loads.
set(gpu_err_cases
  "missing|gopt calibrate: nope.json: cannot open|calibrate --gpu nope.json"
  "foreign|cluster_mixed.json: not a GPU measurements file|calibrate --gpu tests/sim/fixtures/cluster_mixed.json"
  "weight|--model-weight 'x': expected a number > 0|calibrate --gpu a.json --model-weight x"
  "flag|unknown argument '--bogus' with --gpu|calibrate --gpu a.json --bogus"
  "twice|models.conv_grid_grouped: already measured in an earlier file|calibrate --gpu tests/cost/data/h100_grouped_conv.json --gpu tests/cost/data/h100_grouped_conv.json"
  "models|--models needs a value|calibrate --gpu a.json --models corpus --models")
gopt_error_tests(gpu_err "cost;sim" ${gpu_err_cases})

add_test(NAME gpu_preset_current COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_gpu_preset.sh ${GOPT_BIN} ${GOPT_PYTHON}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(gpu_preset_current PROPERTIES SKIP_RETURN_CODE 77 LABELS "cost;sim" TIMEOUT 120)

add_test(NAME gpu_profile_dry_run COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_gpu_profile.sh ${GOPT_BIN} ${GOPT_PYTHON}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(gpu_profile_dry_run PROPERTIES LABELS "cost;python" TIMEOUT 240)

# the GPU measurements importer's fuzz seeds (and any fuzz/corpus_gpu/regress-* finding) replayed
# through the fuzz target's entry point (fuzz/fuzz_gpu_measure.c) in every build
add_executable(replay_gpu ${CMAKE_SOURCE_DIR}/fuzz/replay_onnx.c ${CMAKE_SOURCE_DIR}/fuzz/fuzz_gpu_measure.c)
target_link_libraries(replay_gpu PRIVATE gopt m)
add_test(NAME gpu_fuzz_seed_corpus COMMAND replay_gpu ${CMAKE_SOURCE_DIR}/fuzz/corpus_gpu "*.json"
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(gpu_fuzz_seed_corpus PROPERTIES FAIL_REGULAR_EXPRESSION "runtime error|Sanitizer" LABELS cost)

# --batch on a fixed-batch-1 ONNX export (gopt_graph_rebatch): vgg11 and swin_t (whose Reshape
# targets fold the batch with the windows) at batch 4 have 4x the FLOPs of batch 1
add_test(NAME gpu_rebatch_fixed COMMAND bash -c "set -e; for m in vgg11 swin_t shufflenet_v2_x1_0; do \
a=\$($0 info corpus/\$m.onnx --json 2>/dev/null | $1 -c 'import json,sys; print(json.load(sys.stdin)[\"flops\"])'); \
b=\$($0 info corpus/\$m.onnx --batch 4 --json 2>/dev/null | $1 -c 'import json,sys; print(json.load(sys.stdin)[\"flops\"])'); \
$1 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); assert abs(b / a - 4) < 0.01, (sys.argv[3], a, b); print(\"ok\", sys.argv[3], b / a)' \$a \$b \$m; done" ${GOPT_BIN} ${GOPT_PYTHON}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(gpu_rebatch_fixed PROPERTIES LABELS "cost;cli")

# the shipped H100 preset against real-H100 measurements of 25 architectures it was never fitted
# to (tests/cost/data/README.md); bounds in the script
add_test(NAME gpu_heldout_h100 COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_gpu_heldout.sh ${GOPT_BIN} ${GOPT_PYTHON}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(gpu_heldout_h100 PROPERTIES LABELS "cost;sim" TIMEOUT 300)
