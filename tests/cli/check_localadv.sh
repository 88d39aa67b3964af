#!/usr/bin/env bash
# check_localadv.sh GOPT: the local advantage commands end to end on small graphs: gopt collect
# (two models, --append; placement too), gopt train --method localadv (an interrupted run resumed gives a
# byte-identical file), --evaluate, optimize/compare with khop and guided; one-line errors for a
# corrupted or truncated dataset, a truncated model, a GO policy given to guided, and bad flags.
set -eu
gopt="$1"
here="$(cd "$(dirname "$0")" && pwd)"
ee="$here/expect_error.sh"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
export GOPT_HISTORY=0 GOPT_PROGRESS=0
"$gopt" collect "gpt2:layers=1,seq=16" --task fusion --cluster V100 --samples 200 --seed 2 -o "$t/d.bin" >/dev/null
"$gopt" collect "bert:layers=1,seq=16" --task fusion --cluster V100 --sweeps 1 --append -o "$t/d.bin" | grep -q "2 graphs"
"$gopt" train --method localadv --data "$t/d.bin" --iters 12 --seed 3 -o "$t/full.gpol" >/dev/null 2>&1
set +e
"$gopt" train --method localadv --data "$t/d.bin" --iters 12 --seed 3 --stop-after 5 -o "$t/part.gpol" >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 130 ] || { echo "FAIL: --stop-after exit $rc"; exit 1; }
"$gopt" train --method localadv --data "$t/d.bin" --iters 12 --seed 3 --resume -o "$t/part.gpol" >/dev/null 2>&1
cmp "$t/full.gpol" "$t/part.gpol" || { echo "FAIL: resumed model differs"; exit 1; }
"$gopt" train --method localadv --data "$t/d.bin" --evaluate "$t/full.gpol" | grep -q "kendall_tau"
"$gopt" optimize "gpt2:layers=2,seq=16" --task fusion --cluster V100 --method guided --policy "$t/full.gpol" \
  --start default --budget 60 --alpha 20 --hops 2 --json | grep -q '"method": "guided"'
"$gopt" compare "gpt2:layers=2,seq=16" --task fusion --cluster V100 --methods khop,guided --policy "$t/full.gpol" \
  --budget 40 --json | grep -q '"khop"'
# placement: collect, train, guided (no shipped placement model: --policy)
"$gopt" collect "resnet50:depth=18" --task placement --cluster 2xV100-nvlink --samples 80 -o "$t/p.bin" >/dev/null
"$gopt" train --method localadv --data "$t/p.bin" --iters 4 -o "$t/p.gpol" >/dev/null 2>&1
"$gopt" optimize "resnet50:depth=34" --task placement --cluster 2xV100-nvlink --method guided --policy "$t/p.gpol" \
  --start default --budget 40 --json | grep -q '"evaluations": 40'
# errors
cp "$t/d.bin" "$t/bad.bin"
printf '\x55' | dd of="$t/bad.bin" bs=1 seek=40 conv=notrunc 2>/dev/null
"$ee" "bad.bin: dataset checksum" "$gopt" train --method localadv --data "$t/bad.bin" -o "$t/x.gpol"
head -c 100 "$t/d.bin" >"$t/short.bin"
"$ee" "short.bin: dataset" "$gopt" train --method localadv --data "$t/short.bin" -o "$t/x.gpol"
head -c 500 "$t/full.gpol" >"$t/short.gpol"
"$ee" "short.gpol" "$gopt" optimize "gpt2:layers=1" --task fusion --cluster V100 --method guided --policy "$t/short.gpol"
"$ee" "not a local advantage model|a GO policy" "$gopt" optimize "gpt2:layers=1" --task fusion --cluster V100 \
  --method guided --policy "$here/../../policies/fusion.gpol"
"$ee" "unknown flag '--bogus'" "$gopt" collect "gpt2:layers=1" --task fusion --cluster V100 -o "$t/y.bin" --bogus 1
"$ee" "schedule.*not fusion or placement" "$gopt" collect "gpt2:layers=1" --task schedule --cluster V100 -o "$t/y.bin"
"$ee" "--alpha" "$gopt" optimize "gpt2:layers=1" --task fusion --cluster V100 --method guided --alpha 0
echo "check_localadv: ok"
