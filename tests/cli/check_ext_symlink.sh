#!/usr/bin/env bash
# check_ext_symlink.sh GOPT: `gopt run` / `gopt info` on a model whose external data file is a
# symbolic link: a link leading outside the model's directory is refused with one error line naming
# the file (tests/cli/expect_error.sh), a link that stays inside loads and runs.
set -u
G="$1"
here=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
mkdir -p "$T/model/sub"
cp tests/onnx/data/ext_model.onnx "$T/model/"
cp tests/onnx/data/ext_model.data "$T/outside.data"
cp tests/onnx/data/ext_model.data "$T/model/sub/real.data"

ln -s ../outside.data "$T/model/ext_model.data"
for cmd in run info; do
  bash "$here/expect_error.sh" \
    "ext_model.onnx: initializer 'W': external data 'ext_model.data' resolves to '.*/outside.data', outside the model directory" \
    "$G" $cmd "$T/model/ext_model.onnx" || fails=$((fails + 1))
done

rm "$T/model/ext_model.data"
ln -s sub/real.data "$T/model/ext_model.data"
if "$G" run "$T/model/ext_model.onnx" >/dev/null 2>"$T/err"; then
  echo "ok: link inside the model directory runs"
else
  echo "FAIL: link inside the model directory: $(cat "$T/err")"
  fails=$((fails + 1))
fi
exit $((fails > 0))
