#!/usr/bin/env bash
# check_sim_cli.sh GOPT PYTHON: `gopt simulate --json --trace` on every corpus model and every zoo
# model (default sizes) on a cluster of every preset (V100, A100, H100, TPU-v3, host), on single
# devices and a mixed cluster for three models; then
# check_trace.py validates each JSON result and trace (trace-event fields, no overlap per track,
# last event at the step time); the kernel cost model a run names. Run from the source root.
set -u
gopt="$1"; py="$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
n=0; fails=0
run() { # model cluster
  n=$((n + 1))
  if ! "$gopt" simulate "$1" --cluster "$2" --json --trace "$dir/t$n.trace.json" >"$dir/t$n.out.json" 2>"$dir/t$n.err"; then
    echo "FAIL: gopt simulate $1 --cluster $2: $(grep -v warning "$dir/t$n.err")"; fails=$((fails + 1))
    rm -f "$dir/t$n.out.json" "$dir/t$n.trace.json"
  fi
}
zoo=$("$py" -c 'import json,sys; print(" ".join(m["name"] for m in json.load(sys.stdin)))' < <("$gopt" zoo --json))
for m in corpus/*.onnx $zoo; do
  for c in 4xV100-nvlink 4xA100 8xH100 4xTPUv3 2xhost; do run "$m" "$c"; done
done
for m in corpus/resnet18.onnx bert gnmt; do
  for c in V100 A100 H100 TPUv3 host 2xV100-pcie tests/sim/fixtures/cluster_mixed.json; do run "$m" "$c"; done
done
# placement, fusion and schedule files on a multi-device run
n=$((n + 1))
"$gopt" simulate resnet50 --cluster 2xV100-pcie --placement tests/sim/fixtures/resnet50_split.json \
  --fusion tests/sim/fixtures/resnet50_fusion.json --json --trace "$dir/t$n.trace.json" >"$dir/t$n.out.json" \
  || { echo "FAIL: decisions run"; fails=$((fails + 1)); }
"$py" "$(dirname "$0")/check_trace.py" "$dir" || fails=$((fails + 1))
# the kernel cost model each run names: the H100's calibration, the V100's and A100's scaled from
# it, the TPU's and a custom device's roofline, each once
"$gopt" simulate resnet50 --cluster tests/sim/fixtures/cluster_mixed.json --json >"$dir/km.json" &&
  "$gopt" simulate resnet50 --cluster H100 >"$dir/km.txt" || { echo "FAIL: kernel model runs"; fails=$((fails + 1)); }
"$py" - "$dir/km.json" "$dir/km.txt" <<'PY' || fails=$((fails + 1))
import json, re, sys
k = json.load(open(sys.argv[1]))["kernel_model"]
m = re.fullmatch(r"measured-GPU (h100-[0-9-]+)-scaled, roofline", k)
assert m, k
line = open(sys.argv[2]).readline()
assert line.rstrip().endswith("(kernels: measured-GPU %s)" % m.group(1)), line
print("ok: kernel models:", k, "|", line.strip())
PY
echo "$n runs, $fails failures"
[ "$fails" -eq 0 ]
