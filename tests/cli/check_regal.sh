#!/usr/bin/env bash
# check_regal.sh GOPT: REGAL in the CLI: gopt train --method regal writes a REGAL policy;
# optimize --method regal runs brkga-regal from --start with that policy's sampling (kind
# "learned", the budget's evaluations, reproducible for a seed), compare has regal, brkga-regal and
# brkga-tuned rows; a truncated or corrupted REGAL policy, a GO policy given to regal, a REGAL
# policy given to go and bad --brkga / train flags each give one error line.
set -u
gopt="$1"
here="$(cd "$(dirname "$0")" && pwd)"
ee="$here/expect_error.sh"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
py=/usr/bin/python3
m="gpt2:layers=1"
export GOPT_HISTORY=0
"$gopt" train --method regal --task memory --cluster 2xV100-nvlink --graphs "$m" --iters 2 --seed 1 --samples 2 \
  --regal-evals 40 -o "$d/r.gpol" >/dev/null 2>"$d/err" || { cat "$d/err"; fail "train --method regal"; }
"$gopt" train --task memory --cluster 2xV100-nvlink --graphs "$m" --iters 1 --seed 1 --samples 2 \
  -o "$d/go.gpol" >/dev/null 2>"$d/err" || { cat "$d/err"; fail "train (ppo)"; }
common=(--task memory --cluster 2xV100-nvlink --seed 5 --budget 60)
"$gopt" optimize "$m" "${common[@]}" --method regal --policy "$d/r.gpol" --json >"$d/o1.json" || fail "optimize --method regal"
"$gopt" optimize "$m" "${common[@]}" --method regal --policy "$d/r.gpol" --json >"$d/o2.json" || fail "optimize --method regal (2)"
"$gopt" compare "$m" "${common[@]}" --policy "$d/r.gpol" --methods regal,brkga-regal,brkga-tuned,brkga --json \
  >"$d/cmp.json" || fail "compare"
"$py" - "$d/o1.json" "$d/o2.json" "$d/cmp.json" <<'PY' || exit 1
import json, sys
o1, o2, c = (json.load(open(p)) for p in sys.argv[1:4])
assert o1["kind"] == "learned", o1["kind"]
assert o1["evaluations"] == 60, o1["evaluations"]
assert o1["objective"] == o2["objective"], "same seed, same result"
assert o1["policy"].endswith("r.gpol") and "start" in o1
rows = {r["method"]: r for r in c["results"]}
for k in ("regal", "brkga-regal", "brkga-tuned", "brkga"):
    assert k in rows, (k, list(rows))
assert rows["regal"]["kind"] == "learned" and rows["regal"]["objective"] == o1["objective"]
print("ok: regal", o1["objective"])
PY
head -c 200 "$d/r.gpol" > "$d/trunc.gpol"
"$ee" "trunc.gpol: truncated policy file" "$gopt" optimize "$m" "${common[@]}" --method regal --policy "$d/trunc.gpol" || exit 1
cp "$d/r.gpol" "$d/bad.gpol"
printf '\x5a' | dd of="$d/bad.gpol" bs=1 seek=3000 conv=notrunc 2>/dev/null
"$ee" "bad.gpol: checksum mismatch" "$gopt" optimize "$m" "${common[@]}" --method regal --policy "$d/bad.gpol" || exit 1
"$ee" "go.gpol: .*'go' policy" "$gopt" optimize "$m" "${common[@]}" --method regal --policy "$d/go.gpol" || exit 1
"$ee" "r.gpol: a 'regal' policy \\(use --method regal\\)" "$gopt" optimize "$m" "${common[@]}" --method go --policy "$d/r.gpol" || exit 1
"$ee" "--brkga: expected" "$gopt" optimize "$m" "${common[@]}" --method brkga-tuned --brkga 10,0.2 || exit 1
"$ee" "elite/mutant" "$gopt" optimize "$m" "${common[@]}" --method brkga-tuned --brkga 10,0.6,0.5,0.7 || exit 1
"$ee" "--method: unknown method 'sgd'" "$gopt" train --method sgd --task memory --cluster V100 --graphs "$m" -o "$d/x.gpol" || exit 1
"$ee" "--regal-evals needs --method regal" "$gopt" train --regal-evals 5 --task memory --cluster V100 --graphs "$m" \
  -o "$d/x.gpol" || exit 1
"$ee" "r.gpol: a 'regal' policy; resume it with --method regal" "$gopt" train --resume --task memory \
  --cluster 2xV100-nvlink --graphs "$m" --iters 2 -o "$d/r.gpol" || exit 1
echo "ok: check_regal"
