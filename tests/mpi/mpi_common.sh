# mpi_common.sh: sourced by the MPI test scripts (check_mpi_*.sh GOPT MPIRUN): the binaries, a
# temporary folder $d removed at exit, fail MSG, and mp P CMD... (CMD on P oversubscribed ranks).
set -u
gopt="$1"
mpirun="$2"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mp() { "$mpirun" -np "$1" --oversubscribe "${@:2}"; }
