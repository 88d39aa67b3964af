#!/bin/sh
# check_shared.sh [GOPT] [DIR]: the importer and round-trip check of tests/hlo/check_hlo.py over the
# whole shared module set (default ../shared/hlo, which holds one module more than tests/hlo/data).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
gopt=${1:-$root/build/bin/gopt}
dir=${2:-$root/../shared/hlo}
exec /usr/bin/python3 "$root/tests/hlo/check_hlo.py" "$gopt" "$dir" --roundtrip "${TMPDIR:-/tmp}/gopt_hlo_shared_rt"
