#!/usr/bin/env bash
# check_train.sh GOPT: `gopt train` end to end: trains a small placement policy; an interrupted
# run (--stop-after, as Ctrl-C, inside the --imitate warm start) resumed with --resume writes a file
# identical to the uninterrupted run's; loading it for another task, truncated or corrupted gives one error line naming the file;
# bad flags give one line; SPEC@training trains on the training step; --coarse (a training step's
# PPO batches at go's coarsest level) changes the weights and resumes exactly.
set -u
gopt="$1"
here="$(cd "$(dirname "$0")" && pwd)"
ee="$here/expect_error.sh"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
args=(--task placement --cluster 2xV100-nvlink,4xV100-nvlink --graphs "gpt2:layers=1;transformer:layers=1" --graphs resnet50 --iters 6 --imitate 3 --seed 3 --threads 2 --samples 4)
"$gopt" train "${args[@]}" -o "$d/a.gpol" >"$d/out" 2>"$d/err" || { cat "$d/err"; fail "train exited $?"; }
grep -q "6 graph x cluster pairs, 6 iterations" "$d/out" || { cat "$d/out"; fail "summary line"; }
"$gopt" train "${args[@]}" -o "$d/b.gpol" --stop-after 2 >/dev/null 2>"$d/err"
rc=$?
[ "$rc" -eq 130 ] || fail "interrupted run exited $rc"
grep -q "interrupted at iteration 2 of 6" "$d/err" || { cat "$d/err"; fail "interrupt message"; }
"$gopt" train "${args[@]}" -o "$d/b.gpol" --resume >/dev/null 2>"$d/err" || { cat "$d/err"; fail "resume"; }
cmp -s "$d/a.gpol" "$d/b.gpol" || fail "resumed policy differs from the uninterrupted one"
echo "ok: resume is exact"
kargs=(--task placement --cluster 4xV100-pcie --graphs "transformer:layers=1@training" --iters 4 --seed 3 --threads 2 --samples 4)
"$gopt" train "${kargs[@]}" -o "$d/k0.gpol" >/dev/null 2>"$d/err" || { cat "$d/err"; fail "train a training step"; }
"$gopt" train "${kargs[@]}" --coarse 1 -o "$d/k1.gpol" >/dev/null 2>"$d/err" || { cat "$d/err"; fail "train --coarse"; }
"$gopt" train "${kargs[@]}" --coarse 1 -o "$d/k2.gpol" --stop-after 2 >/dev/null 2>&1
"$gopt" train "${kargs[@]}" --coarse 1 -o "$d/k2.gpol" --resume >/dev/null 2>"$d/err" || { cat "$d/err"; fail "resume --coarse"; }
cmp -s "$d/k1.gpol" "$d/k2.gpol" || fail "resumed --coarse policy differs from the uninterrupted one"
cmp -s "$d/k0.gpol" "$d/k1.gpol" && fail "--coarse 1 trained the same weights as without it"
echo "ok: --coarse resumes exactly"
"$ee" "b.gpol: policy is for task 'placement', not 'fusion'" "$gopt" train --task fusion --cluster V100 --graphs gpt2:layers=1 -o "$d/b.gpol" --resume || exit 1
head -c 1000 "$d/a.gpol" >"$d/t.gpol"
"$ee" "t.gpol: truncated policy file" "$gopt" train "${args[@]}" -o "$d/t.gpol" --resume || exit 1
cp "$d/a.gpol" "$d/c.gpol"
printf '\x55' | dd of="$d/c.gpol" bs=1 seek=2000 conv=notrunc status=none
"$ee" "c.gpol: checksum mismatch" "$gopt" train "${args[@]}" -o "$d/c.gpol" --resume || exit 1
"$ee" "nope.gpol: cannot open" "$gopt" train "${args[@]}" -o "$d/nope.gpol" --resume || exit 1
"$ee" "gopt train: missing --graphs" "$gopt" train --task placement --cluster V100 -o "$d/x.gpol" || exit 1
"$ee" "gopt train: --task: unknown task 'frob'" "$gopt" train --task frob --cluster V100 --graphs resnet50 -o "$d/x.gpol" || exit 1
"$ee" "gopt train: unknown flag '--frob'" "$gopt" train --frob || exit 1
"$ee" "frobnet" "$gopt" train --task placement --cluster V100 --graphs "resnet50;frobnet" -o "$d/x.gpol" || exit 1
"$ee" "gopt train: --lr: expected a learning rate in .0, 1., got '0'" "$gopt" train "${args[@]}" --lr 0 -o "$d/x.gpol" || exit 1
"$ee" "gopt train: --kl: expected a weight >= 0, got '-1'" "$gopt" train "${args[@]}" --kl -1 -o "$d/x.gpol" || exit 1
"$ee" "gopt train: --kl: only the placement policy's segment head" "$gopt" train --task fusion --cluster V100 --graphs resnet50 --kl 0.1 -o "$d/x.gpol" || exit 1
"$ee" "gopt train: --coarse: expected a share in .0, 1., got '1.5'" "$gopt" train "${args[@]}" --coarse 1.5 -o "$d/x.gpol" || exit 1
"$ee" "gopt train: --coarse: only the placement policy's segment head" "$gopt" train --task fusion --cluster V100 --graphs resnet50 --coarse 0.5 -o "$d/x.gpol" || exit 1
# SPEC@training trains on the training step: the policy's training set names the pair so
"$gopt" train --task placement --cluster 2xV100-nvlink --graphs "gpt2:layers=1@training" --iters 2 --samples 2 \
  --lr 1e-3 -o "$d/s.gpol" >/dev/null 2>"$d/err" || { cat "$d/err"; fail "train on a training step"; }
grep -aq "^set gpt2:layers=1@training@2xV100-nvlink" "$d/s.gpol" || fail "the training step's pair is not in the policy's set"
"$ee" "frobnet" "$gopt" train --task placement --cluster V100 --graphs "frobnet@training" -o "$d/x.gpol" || exit 1
echo "ok"
