#!/usr/bin/env bash
# ctest "cli" (and part of ctest "install", on the installed copies): every ringfeed command
# answers --version with one line "NAME VERSION" (the library's rf_version()) and -h/--help
# with its usage on stdout, each with exit status 0 and nothing on stderr; an unknown option
# still ends with exit status 2 and a message on stderr only.
# usage: cli_test.sh VERSION BINARY...
set -uo pipefail
version=$1
shift
[ $# -gt 0 ] || { echo "cli_test.sh: no binaries given"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "$name $*"; fail=1; }
for bin in "$@"; do
  name=$(basename "$bin")
  "$bin" --version >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ $rc -eq 0 ] || bad "--version: exit status $rc"
  [ "$(cat "$tmp/out")" = "$name $version" ] ||
    bad "--version printed '$(cat "$tmp/out")', expected '$name $version'"
  [ ! -s "$tmp/err" ] || bad "--version wrote to stderr: $(head -c 200 "$tmp/err")"
  for opt in -h --help; do
    "$bin" $opt >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc -eq 0 ] || bad "$opt: exit status $rc"
    head -n 1 "$tmp/out" | grep -q "^usage: $name " ||
      bad "$opt: stdout does not start with 'usage: $name ': '$(head -n 1 "$tmp/out")'"
    [ ! -s "$tmp/err" ] || bad "$opt wrote to stderr: $(head -c 200 "$tmp/err")"
  done
  "$bin" --no-such-option >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ $rc -eq 2 ] || bad "--no-such-option: exit status $rc, expected 2"
  [ ! -s "$tmp/out" ] || bad "--no-such-option wrote to stdout"
  [ -s "$tmp/err" ] || bad "--no-such-option said nothing on stderr"
done
[ $fail -eq 0 ] && echo "cli: $# commands answer --version, -h, --help and an unknown option"
exit $fail
