#!/usr/bin/env bash
# fresh.sh: measures the first run on a fresh Debian 12 (a debootstrap minbase chroot, the smallest
# Debian system): how many packages the README's first command (./gopt compare ...) installs and its
# wall time, the same for ./test, and `apt install ./gopt_*.deb` followed by the same gopt command.
# Needs root, debootstrap and the Debian mirror; writes a Markdown table on stdout, logs under
# $work/logs. The source is the committed tree (git archive HEAD).
#   bench/install/fresh.sh [--no-test]       (GOPT_FRESH_BASE=DIR reuses a minbase tree)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
run_test=1
[ "${1:-}" = "--no-test" ] && run_test=0
work="$(mktemp -d /tmp/gopt-fresh.XXXXXX)"
mkdir -p "$work/logs"
base="${GOPT_FRESH_BASE:-$work/base}"
if [ ! -x "$base/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >&2
  debootstrap --variant=minbase bookworm "$base" http://deb.debian.org/debian >"$work/logs/debootstrap.log"
fi
main_cmd="compare inception_v3 --task placement --cluster 4xV100-nvlink --training"

# Makes a fresh copy of the base system at $1 with /proc, /sys and /dev mounted.
mkroot() {
  cp -a "$base" "$1"
  cp /etc/resolv.conf "$1/etc/resolv.conf"
  mount -t proc proc "$1/proc"
  mount --rbind /sys "$1/sys"
  mount --rbind /dev "$1/dev"
}
umroot() { umount -R "$1/dev" "$1/sys" "$1/proc" 2>/dev/null || umount -l "$1/dev" "$1/sys" "$1/proc" || true; }
npkgs() { chroot "$1" dpkg-query -W -f='${Status}\n' | grep -c "install ok installed"; }
# Runs "$2" in chroot $1 as a login shell in /root/gopt; prints "packages_added seconds".
timed() {
  local before after t0 t1
  before=$(npkgs "$1")
  t0=$(date +%s.%N)
  chroot "$1" /bin/bash -lc "cd /root/gopt 2>/dev/null || cd /root; $2" >>"$3" 2>&1
  t1=$(date +%s.%N)
  after=$(npkgs "$1")
  echo "$((after - before)) $(echo "$t1 - $t0" | bc)"
}
command -v bc >/dev/null || apt-get install -y -qq bc >&2

src="$work/src"
root="$work/root"
mkroot "$root"
trap 'umroot "$root"; [ -d "$work/root2" ] && umroot "$work/root2"' EXIT
mkdir -p "$root/root/gopt"
git -C "$here" archive HEAD | tar -x -C "$root/root/gopt"
# the scripts need apt-get (present) and bash; nothing else is preinstalled in minbase
read -r main_pk main_s < <(timed "$root" "./gopt $main_cmd" "$work/logs/gopt.log")
grep -q "default" "$work/logs/gopt.log" || { echo "fresh: ./gopt failed, see $work/logs/gopt.log" >&2; exit 1; }
# ./gopt must have asked for the build set only: no package of the test set that build lacks was
# installed by name (a dependency of a build package, e.g. openmpi-bin of libopenmpi-dev, is
# marked automatic by apt and is fine)
manual="$(chroot "$root" apt-mark showmanual)"
for p in $("$here/tools/install-deps.sh" --print test); do
  "$here/tools/install-deps.sh" --print build | grep -qx "$p" && continue
  if grep -qx "$p" <<<"$manual"; then
    echo "fresh: ./gopt installed the test package $p" >&2
    exit 1
  fi
done
echo "| step | packages installed | wall time (s) |"
echo "|---|---:|---:|"
echo "| \`./gopt $main_cmd\` (fresh minbase, $(npkgs "$base") packages) | $main_pk | $(printf %.0f "$main_s") |"
if [ $run_test -eq 1 ]; then
  read -r test_pk test_s < <(timed "$root" "./test" "$work/logs/test.log")
  grep -q "100% tests passed" "$work/logs/test.log" || echo "fresh: ./test did not pass, see $work/logs/test.log" >&2
  echo "| \`./test\` after it (build + test sets, full suite) | $test_pk | $(printf %.0f "$test_s") |"
fi
# the Debian package, built on the host, installed into another fresh copy
"$here/tools/make-deb.sh" >"$work/logs/make-deb.log" 2>&1
deb="$(ls "$here"/build-deb/gopt_*_amd64.deb)"
mkroot "$work/root2"
cp "$deb" "$work/root2/root/"
read -r deb_pk deb_s < <(timed "$work/root2" "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ./$(basename "$deb") && gopt $main_cmd" "$work/logs/deb.log")
grep -q "default" "$work/logs/deb.log" || { echo "fresh: the .deb run failed, see $work/logs/deb.log" >&2; exit 1; }
echo "| \`apt install ./$(basename "$deb")\` + \`gopt $main_cmd\` | $deb_pk | $(printf %.0f "$deb_s") |"
