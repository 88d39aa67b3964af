#!/usr/bin/env bash
# Installs the Debian packages gopt needs to build, test and make its corpus.
# Does nothing when they are all present; otherwise runs apt-get (as root, or through sudo).
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config clang
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev
  libjansson-dev libopenblas-dev libdnnl-dev libmetis-dev libglpk-dev
  python3-numpy python3-onnx python3-torch python3-torchvision
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
