#!/bin/sh
# check_exports.sh LIB: fails when the shared library LIB exports (dynamic symbol table, defined
# symbols) any name that does not start with gopt_ or is not declared in a public header
# (include/gopt/*.h, relative to the working directory), or exports no gopt_ name at all (a broken
# build or a wrong file). Prints the offending names, one per line, then a one-line summary.
set -u
lib=${1:?usage: check_exports.sh LIBGOPT.so}
syms=$(nm -D --defined-only "$lib") || { echo "check_exports: nm -D failed on $lib" >&2; exit 1; }
names=$(printf '%s\n' "$syms" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u)
bad=$(printf '%s\n' "$names" | grep -v '^gopt_' | grep -v '^$')
good=$(printf '%s\n' "$names" | grep -c '^gopt_')
for n in $(printf '%s\n' "$names" | grep '^gopt_'); do
  grep -qw -- "$n" include/gopt/*.h || bad="$bad
$n (not in include/gopt/)"
done
bad=$(printf '%s\n' "$bad" | grep -v '^$')
if [ -n "$bad" ]; then
  printf '%s\n' "$bad"
  echo "check_exports: $lib exports $(printf '%s\n' "$bad" | wc -l) defined symbol(s) that are not public gopt_ names" >&2
  exit 1
fi
if [ "$good" -eq 0 ]; then
  echo "check_exports: $lib exports no gopt_ symbol" >&2
  exit 1
fi
echo "check_exports: $lib exports $good symbols, all gopt_*"
