#!/usr/bin/env bash
# bench/sim/search_evals.sh: wall time per evaluation of the search methods on the ~80k-node zoo
# graphs (gopt optimize --task placement, one thread, --start default), for docs/BENCHMARKS.md.
# Usage: bench/sim/search_evals.sh GOPT [GOPT_BEFORE]: with two binaries (e.g. one built from an
# earlier commit) each method runs under both, interleaved, so the "before" and "after" columns
# share the machine's load. BUDGET=300 evaluations per run by default (go: PPO fine-tuning for
# GO_FINETUNE=20 evaluations, 4 samples); METHODS and SPECS override.
set -euo pipefail
cd "$(dirname "$0")/../.."
new="$1"
old="${2:-}"
budget="${BUDGET:-300}"
per_eval() { # GOPT SPEC METHOD -> "ms_per_eval evaluations"
  local extra=()
  case "$3" in go) extra=(--policy policies/placement.gpol --finetune "${GO_FINETUNE:-20}" --samples 4) ;; esac
  "$1" optimize "$2" --task placement --cluster 4xV100-nvlink --method "$3" --budget "$budget" \
    --threads 1 --start default --no-history --json "${extra[@]}" 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); s=j["seconds"]; n=j["evaluations"]; print("%.2f %d" % (1e3*s/max(n,1), n))'
}
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo
if [ -n "$old" ]; then
  echo "| graph | method | evaluations | before: ms / evaluation | after: ms / evaluation | speedup |"
  echo "|---|---|---|---|---|---|"
else
  echo "| graph | method | evaluations | ms / evaluation |"
  echo "|---|---|---|---|"
fi
for spec in ${SPECS:-"gnmt:steps=311" "inception_v3:repeat=309"}; do
  for m in ${METHODS:-random local anneal gibbs brkga go}; do
    read -r a n < <(per_eval "$new" "$spec" "$m")
    if [ -n "$old" ]; then
      read -r b _ < <(per_eval "$old" "$spec" "$m")
      echo "| zoo $spec | $m | $n | $b | $a | $(/usr/bin/python3 -c "print(f'{$b/$a:.2f}x')") |"
    else
      echo "| zoo $spec | $m | $n | $a |"
    fi
  done
done
