#!/usr/bin/env bash
# bench/sim/run.sh: simulator throughput section for docs/BENCHMARKS.md: full and incremental
# evaluations per second on ~10k and ~80k-node zoo graphs, one thread and all threads, next to one
# sequential pass over the simulator's input arrays (same run), the speedup of incremental
# re-evaluation over simulating the same one-node change from time 0, and the delta-evaluation
# figures (one-node device / priority changes: time, speedup over a full evaluation, replayed
# share of the timeline), and for device moves an estimate of the share a splice of an identical
# or time-shifted recorded tail could leave to replay. Usage: bench/sim/run.sh [BUILD_DIR]
# (default build/, Release; builds bench_sim if needed). REPS=5 by default; SIM_SPECS overrides the graphs.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
if [ ! -x "$build/bench/bench_sim" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target bench_sim >/dev/null
fi
reps="${REPS:-5}"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "### Simulator throughput (median of $reps repetitions; one-thread columns and the pass in thread CPU time, all-thread columns in wall time)"
echo
echo "| graph | nodes | cluster | transfers/step | full evals/s (1 thr) | full eval / pass | one-node change from t=0 /s | incremental (device) /s | incremental (priority) /s | speedup over t=0 (device / priority) | iterations replayed | full evals/s (all $(nproc) thr) | incremental evals/s (all thr) | input arrays | one pass over them |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for spec in ${SIM_SPECS:-"gnmt:steps=39" "inception_v3:repeat=39" "gnmt:steps=311" "inception_v3:repeat=309"}; do
  cl=4xV100-nvlink
  case "$spec" in transformer*) cl=8xH100 ;; esac
  j=$("$build/bench/bench_sim" "$spec" "$cl" "$reps")
  echo "$j" >>"$out"
  /usr/bin/python3 - "$j" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
print(f"| zoo {j['model']} | {j['nodes']} | {j['cluster']} | {j['transfers']} | {j['full_per_s']:.0f} | {j['full_over_pass']:.1f}x | "
      f"{j['resim_per_s']:.0f} | {j['incremental_per_s']:.0f} | {j['incremental_prio_per_s']:.0f} | "
      f"{j['speedup_vs_resim']:.2f}x / {j['prio_speedup_vs_resim']:.2f}x | {100*j['replayed_share']:.0f} % | "
      f"{j['full_per_s_all']:.0f} | {j['incremental_per_s_all']:.0f} | {j['input_bytes']/2**20:.1f} MiB | "
      f"{j['pass_s']*1e6:.0f} us ({j['pass_gb_s']:.1f} GB/s) |")
PY
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print()
print("### Delta evaluation (one-node changes; per-evaluation thread CPU time; replayed share = iterations simulated / iterations of the step)")
print()
print("| graph | nodes | full eval (apply + simulate) | full / pass | device change: median time | speedup vs full (median / mean rate) | replayed share p50 / p90 / mean | priority change: median time | speedup vs full (median / mean rate) | replayed share p50 / p90 / mean |")
print("|---|---|---|---|---|---|---|---|---|---|")
for j in rows:
    f = 1e6 / j['full_per_s']
    print(f"| zoo {j['model']} | {j['nodes']} | {f:.0f} us | {j['full_over_pass']:.1f}x | "
          f"{j['delta_dev_p50_s']*1e6:.0f} us | {j['delta_dev_p50_speedup_vs_full']:.1f}x / {j['delta_dev_speedup_vs_full']:.1f}x | "
          f"{100*j['share_dev_p50']:.1f} % / {100*j['share_dev_p90']:.0f} % / {100*j['share_dev_mean']:.0f} % | "
          f"{j['delta_prio_p50_s']*1e6:.0f} us | {j['delta_prio_p50_speedup_vs_full']:.1f}x / {j['delta_prio_speedup_vs_full']:.1f}x | "
          f"{100*j['share_prio_p50']:.1f} % / {100*j['share_prio_p90']:.0f} % / {100*j['share_prio_mean']:.0f} % |")
print()
print("### Device moves: what a time-shifted splice could skip (estimate; 200 moves per graph, units ordered by recorded start)")
print()
print("| graph | replayed now (delta) p50 | if an identical tail at any iteration index spliced: p50 / mean | if a tail shifted by one constant spliced: p50 / mean | one constant per device: p50 / mean |")
print("|---|---|---|---|---|")
for j in rows:
    print(f"| zoo {j['model']} | {100*j['shift_actual_p50']:.1f} % | "
          f"{100*j['shift_none_p50']:.1f} % / {100*j['shift_none_mean']:.1f} % | "
          f"{100*j['shift_global_p50']:.1f} % / {100*j['shift_global_mean']:.1f} % | "
          f"{100*j['shift_device_p50']:.1f} % / {100*j['shift_device_mean']:.1f} % |")
PY
