# Simulator CLI tests: every corpus and zoo model simulated with a valid trace (check_sim_cli.sh),
# one-line errors for bad flags/files, and calibrate/fidelity against the synthetic cost database
# test_sim_calibration_selfconsistency writes (fixture gopt_sim_db).
set(SIM_DIR ${CMAKE_CURRENT_LIST_DIR})
add_test(NAME sim_cli_models COMMAND bash ${SIM_DIR}/check_sim_cli.sh ${GOPT_BIN} ${GOPT_PYTHON}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(sim_cli_models PROPERTIES TIMEOUT 300 LABELS sim)

set(sim_err_cases
  "bad_cluster|unknown device 'V999'|simulate resnet50 --cluster 4xV999"
  "bad_link|unknown link 'fiber'|simulate resnet50 --cluster 2xV100-fiber"
  "no_cluster|missing --cluster|simulate resnet50"
  "cluster_file|cluster_missing.json: cannot open|simulate resnet50 --cluster tests/sim/fixtures/cluster_missing.json"
  "cluster_json|decisions_bad_node.json: a cluster needs a non-empty .devices.|simulate resnet50 --cluster tests/sim/fixtures/decisions_bad_node.json"
  "bad_flag|unknown flag '--bogus'|simulate resnet50 --cluster V100 --bogus"
  "bad_costs|--costs: expected analytical, measured or auto|simulate resnet50 --cluster V100 --costs fast"
  "measured_nodb|--costs measured needs --costdb|simulate resnet50 --cluster V100 --costs measured"
  "unknown_node|placement: unknown node 'conv_nope'|simulate resnet50 --cluster V100 --placement tests/sim/fixtures/decisions_bad_node.json"
  "nonconvex|group 0 \\(layer1.0.conv1, layer1.0.conv3\\) is not convex|simulate resnet50 --cluster V100 --fusion tests/sim/fixtures/resnet50_nonconvex.json"
  "device_range|on device 1, the cluster has 1 devices|simulate resnet50 --cluster V100 --placement tests/sim/fixtures/resnet50_split.json"
  "devices_flag|unknown argument '--x'|devices --x"
  "fidelity_nodb|needs MODEL... and --costdb|fidelity resnet50"
  "calibrate_nodb|missing --costdb|calibrate resnet50")
gopt_error_tests(sim_err "sim" ${sim_err_cases})

# calibration self-consistency (calibrate + fidelity CLI on the synthetic db): the calibrated host
# predicts the db it was fitted on (nearly) exactly; says nothing about real-hardware fidelity
if(TEST test_sim_calibration_selfconsistency)
  set_tests_properties(test_sim_calibration_selfconsistency PROPERTIES FIXTURES_SETUP gopt_sim_db)
endif()
add_test(NAME sim_calibration_selfconsistency_cli
         COMMAND bash -c "set -e; db=\${TMPDIR:-/tmp}/gopt_sim_synth_costdb.json; h=\$(mktemp --suffix=.json); \
$0 fidelity resnet50 --costdb \$db --json > \$h.before; \
$0 calibrate --costdb \$db resnet50 -o \$h > /dev/null; \
$0 fidelity resnet50 --costdb \$db --cluster \$h --json > \$h.after; \
$0 devices --json > \$h.dev; \
$1 -c 'import json,sys; b=json.load(open(sys.argv[1])); a=json.load(open(sys.argv[2])); d=json.load(open(sys.argv[3])); \
m=a[\"models\"][0]; assert b[\"models\"][0][\"median_abs_pct_error\"] > 5, b; assert m[\"median_abs_pct_error\"] < 1, m; \
assert m[\"kendall_tau\"] > 0.95 and abs(m[\"step_error_pct\"]) < 1 and \"end_to_end_error_pct\" in m, m; \
assert {p[\"name\"] for p in d[\"presets\"]} >= {\"V100\",\"A100\",\"H100\",\"TPUv3\",\"host\"}; print(\"ok\", m)' \$h.before \$h.after \$h.dev; \
rm -f \$h \$h.before \$h.after \$h.dev" ${GOPT_BIN} ${GOPT_PYTHON}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(sim_calibration_selfconsistency_cli PROPERTIES FIXTURES_REQUIRED gopt_sim_db LABELS sim)
