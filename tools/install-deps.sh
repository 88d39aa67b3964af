#!/usr/bin/env bash
# install-deps.sh: installs the Debian packages of named dependency sets, only what is missing.
#
#   tools/install-deps.sh [SET...]      install the sets (default: build); nothing when all present
#   tools/install-deps.sh --print SET   print SET's packages, one per line; installs nothing
#   tools/install-deps.sh --list        the sets and what each is for
#
# Sets (the README lists them too):
#   build  compilers, CMake and the libraries libgopt and the CLI link: enough to build gopt and
#          run every command (./gopt installs only this; `gopt report` draws its graph section
#          with Graphviz when it is there and says how to install it when not)
#   test   what the test suite adds: python-onnx, numpy, PyTorch and torchvision for the reference
#          fixtures (Debian's /usr/bin/python3), ONNX Runtime (npm) as the output oracle, Chromium
#          playwright-core and Graphviz for the report's browser test, clang for the libFuzzer target,
#          dpkg-dev for the Debian package, and Open MPI (libopenmpi-dev, openmpi-bin): the build
#          turns MPI on when it finds it (GOPT_MPI), so ./test builds and tests the MPI commands
#          while ./gopt does not need it (./test installs build and test)
#   tools  what the corpus export and benchmark scripts need (tools/, bench/)
# Debian packages are installed with apt-get (as root, or through sudo), without recommends.
# Entries "npm:NAME@VERSION" are npm packages, installed with `npm install --ignore-scripts` into
# .deps/node/ of the checkout (node_modules there; tools/ort/ort_run.js uses it); Debian's nodejs
# and npm come first when missing.
set -euo pipefail

set_build=(
  gcc libc6-dev make cmake pkg-config
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev
  libjansson-dev libopenblas-dev libdnnl-dev libmetis-dev libglpk-dev
  libz3-dev
  libsqlite3-dev
)
set_test=(
  clang dpkg-dev
  npm:onnxruntime-node@1.30.0
  npm:playwright-core@1.60.0
  python3-numpy python3-onnx python3-torch python3-torchvision
  chromium graphviz
  libopenmpi-dev openmpi-bin
)
set_tools=(
  python3-numpy python3-onnx python3-torch python3-torchvision
  time
)

die() {
  echo "install-deps: $*" >&2
  exit 2
}

# Prints the packages of set $1 (one per line), or fails naming the unknown set.
print_set() {
  case "$1" in
    build) printf '%s\n' "${set_build[@]}" ;;
    test) printf '%s\n' "${set_test[@]}" ;;
    tools) printf '%s\n' "${set_tools[@]}" ;;
    *) die "unknown dependency set '$1' (build, test, tools)" ;;
  esac
}

case "${1:-}" in
  --print)
    [ $# -eq 2 ] || die "usage: tools/install-deps.sh --print SET"
    print_set "$2"
    exit 0
    ;;
  --list)
    echo "build  compilers, CMake and the libraries libgopt links (./gopt)"
    echo "test   fixtures' Python packages, clang for fuzzing, dpkg-dev for the .deb (./test)"
    echo "tools  the corpus export and benchmark scripts' Python packages"
    exit 0
    ;;
  -*) die "unknown option '$1' (--print SET, --list)" ;;
esac

sets=("$@")
[ ${#sets[@]} -eq 0 ] && sets=(build)
wanted=()
for s in "${sets[@]}"; do
  pk="$(print_set "$s")" || exit 2
  mapfile -t -O "${#wanted[@]}" wanted <<<"$pk"
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
node_dir="$root/.deps/node"
missing=() npm_missing=()
for p in "${wanted[@]}"; do
  if [ "${p#npm:}" != "$p" ]; then
    name="${p#npm:}"
    version="${name##*@}"
    name="${name%@*}"
    grep -qs "\"version\": \"$version\"" "$node_dir/node_modules/$name/package.json" ||
      npm_missing+=("${p#npm:}")
    continue
  fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#npm_missing[@]} -gt 0 ] && ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
[ ${#missing[@]} -eq 0 ] && [ ${#npm_missing[@]} -eq 0 ] && exit 0

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing (${sets[*]}): ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  # one apt at a time on this machine (parallel builds may call this script together)
  lock=()
  command -v flock >/dev/null && lock=(flock /tmp/gopt-install-deps.lock)
  $SUDO "${lock[@]}" apt-get update -qq
  $SUDO "${lock[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
if [ ${#npm_missing[@]} -gt 0 ]; then
  echo "install-deps: installing from npm into $node_dir: ${npm_missing[*]}" >&2
  mkdir -p "$node_dir"
  npm install --ignore-scripts --no-audit --no-fund --silent --prefix "$node_dir" "${npm_missing[@]}" >&2
fi
