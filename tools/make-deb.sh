#!/usr/bin/env bash
# make-deb.sh: builds the Debian package gopt_<version>_amd64.deb (CLI, libgopt shared and static,
# headers, gopt.pc, man page, Python binding, shipped policies) into build-deb/, then shows what it holds
# (dpkg-deb -c) and what it depends on (dpkg-deb -I), and fails when a part is missing.
#   tools/make-deb.sh            build and inspect
# Install it with: apt install ./build-deb/gopt_*_amd64.deb
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
tools/install-deps.sh build
command -v dpkg-shlibdeps >/dev/null || tools/install-deps.sh test
b=build-deb
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >/dev/null
cmake --build "$b" -j"$(nproc)" --target gopt gopt_shared gopt_cli >/dev/null
rm -f "$b"/gopt_*.deb
(cd "$b" && cpack -G DEB >/dev/null)
deb="$(ls "$b"/gopt_*_amd64.deb)"
echo "== $deb: files"
dpkg-deb -c "$deb"
echo "== $deb: control"
dpkg-deb -I "$deb"
files="$(dpkg-deb -c "$deb")"
for want in ./usr/bin/gopt ./usr/include/gopt/graph.h ./usr/share/man/man1/gopt.1 \
  /pkgconfig/gopt.pc /libgopt.so. /libgopt.a ./usr/lib/python3/dist-packages/gopt/__init__.py \
  ./usr/lib/python3/dist-packages/gopt/_install.py ./usr/share/gopt/examples/reinforce_placement.py; do
  grep -qF -- "$want" <<<"$files" || { echo "make-deb: $deb lacks $want" >&2; exit 1; }
done
depends="$(dpkg-deb -f "$deb" Depends)"
for lib in libdnnl libglpk libjansson libmetis libopenblas libprotobuf-c libgomp libc6 libz3 libsqlite3; do
  grep -q "$lib" <<<"$depends" || { echo "make-deb: $deb does not depend on $lib ($depends)" >&2; exit 1; }
done
echo "make-deb: ok: $deb"
