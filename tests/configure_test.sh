#!/usr/bin/env bash
# ctest "configure": RINGFEED_TESTS=AUTO|ON|OFF against a machine without Check. Check is
# hidden from pkg-config (PKG_CONFIG_LIBDIR: a folder linking every .pc file pkg-config would
# see, except check.pc), and the source tree is configured in temporary folders:
#   AUTO (the default)  succeeds and says the tests are off and why, generating no tests;
#   ON                  fails and names what to install;
#   OFF                 succeeds without asking pkg-config for Check at all (no CHECK_* entry
#                       in the cache), even with Check visible.
# usage: configure_test.sh SOURCE_DIR TMP_DIR
set -uo pipefail
src=$1
mkdir -p "$2" && tmp=$(mktemp -d "$2/configure.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "$*"; fail=1; }
mkdir -p "$tmp/pc"
IFS=: read -r -a dirs <<<"${PKG_CONFIG_PATH:+$PKG_CONFIG_PATH:}$(pkg-config --variable pc_path pkg-config)"
for d in "${dirs[@]}"; do
  for f in "$d"/*.pc; do
    [ -e "$f" ] && [ "$(basename "$f")" != check.pc ] && ln -sf "$f" "$tmp/pc/"
  done
done
[ -e "$tmp/pc/liburing.pc" ] || { echo "configure_test.sh: liburing.pc not found on pkg-config's path"; exit 1; }
configure() { # NAME [cmake args...]: output in $tmp/NAME.log, exit status returned
  local name=$1
  shift
  cmake -S "$src" -B "$tmp/$name" -DRINGFEED_CUDA=OFF -DRINGFEED_TOOLS=OFF "$@" \
    >"$tmp/$name.log" 2>&1
}
PKG_CONFIG_LIBDIR=$tmp/pc PKG_CONFIG_PATH= configure auto ||
  bad "AUTO without Check: configure failed: $(tail -n 20 "$tmp/auto.log")"
grep -q "ringfeed: tests OFF (Check not found: install check and libsubunit-dev" "$tmp/auto.log" ||
  bad "AUTO without Check: no 'tests OFF' line in: $(cat "$tmp/auto.log")"
[ ! -e "$tmp/auto/CTestTestfile.cmake" ] || bad "AUTO without Check: tests were generated"

PKG_CONFIG_LIBDIR=$tmp/pc PKG_CONFIG_PATH= configure on -DRINGFEED_TESTS=ON &&
  bad "ON without Check: configure succeeded"
grep -q "RINGFEED_TESTS=ON but Check was not found" "$tmp/on.log" ||
  bad "ON without Check: no message naming Check in: $(tail -n 20 "$tmp/on.log")"

configure off -DRINGFEED_TESTS=OFF || bad "OFF: configure failed: $(tail -n 20 "$tmp/off.log")"
! grep -q "^CHECK_\|pkg_config_checked_CHECK" "$tmp/off/CMakeCache.txt" ||
  bad "OFF: pkg-config was asked for Check: $(grep "CHECK" "$tmp/off/CMakeCache.txt")"
! grep -q "tests OFF\|tests ON" "$tmp/off.log" || bad "OFF: a tests line was printed"
[ $fail -eq 0 ] && echo "configure: AUTO, ON and OFF behave as documented without Check"
exit $fail
