#!/usr/bin/env bash
# The binary wheel on a machine without ringfeed's runtime libraries (issue 21; tools/test.sh
# runs it after pytest, a few minutes): tools/wheel.sh builds and repairs it, a fresh venv in a
# temporary folder installs it (numpy and pytest from PyPI), then in a mount namespace where
# every liburing, libjpeg, libspng and libwebp file that `ldconfig -p` lists is /dev/null (a load
# that reached one fails), from a temporary cwd with no RINGFEED_LIB or PYTHONPATH,
# python/tests/test_wheel.py imports the installed package and reads shards generated
# beforehand for one epoch. Before that, the same namespace must refuse the system's liburing
# and the unrepaired wheel's library, or the hiding proves nothing and the test fails.
# Needs build-test/datasets/ringfeed-gen (tools/test.sh builds it) or RINGFEED_GEN.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
gen=${RINGFEED_GEN:-$repo/build-test/datasets/ringfeed-gen}
[ -x "$gen" ] || { echo "wheel_test: no ringfeed-gen at $gen (build build-test first)" >&2; exit 1; }

# wheel.sh's lines are shown on stderr through the open descriptor: `tee /dev/stderr` would
# reopen a redirected log file and truncate it, losing everything CI printed before.
built=$(tools/wheel.sh)
printf '%s\n' "$built" >&2
wheel=$(sed -n 's/^wheel: \([^ ]*\).*/\1/p' <<<"$built")
raw=$(ls "$repo"/build-wheel/raw/ringfeed-*.whl)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q "$wheel" pytest
"$gen" --output "$tmp/shards/train-%06d.tar" --images 40 --classes 5 --per-shard 16 --seed 21 \
  --max-side 64 --quiet
"$tmp/venv/bin/python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("ringfeed/libringfeed.so.0", sys.argv[2])' \
  "$raw" "$tmp/raw"

# The files behind the libraries' names, each once.
hide=$(ldconfig -p | awk '$1 ~ /^lib(uring|jpeg|spng|webp)[a-z]*\.so/ {print $NF}' |
       xargs -r readlink -f | sort -u)
[ -n "$hide" ] || { echo "wheel_test: ldconfig -p lists none of the libraries to hide" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then
  ns=(unshare --mount)
else
  ns=(unshare -rm)  # an unprivileged user namespace with its own mounts
fi
mkdir "$tmp/cwd"
# shellcheck disable=SC2016 # expanded by the inner shell
"${ns[@]}" env -i PATH=/usr/bin:/bin HOME="$tmp" RINGFEED_TEST_INSTALLED=1 \
  RINGFEED_WHEEL_SHARDS="$tmp/shards/train-*.tar" bash -euo pipefail -c '
  venv=$1 raw=$2 tests=$3
  shift 3
  for f in "$@"; do mount --bind /dev/null "$f"; done
  cd "$(dirname "$venv")/cwd"
  if "$venv/bin/python" -c "import ctypes; ctypes.CDLL(\"liburing.so.2\")" 2>/dev/null; then
    echo "wheel_test: the system liburing still loads: the libraries are not hidden" >&2
    exit 1
  fi
  if out=$("$venv/bin/python" -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$raw" 2>&1); then
    echo "wheel_test: the unrepaired library loads with the libraries hidden" >&2
    exit 1
  fi
  echo "hidden: $*"
  echo "the unrepaired wheel'"'"'s library in this namespace: ${out##*$'"'"'\n'"'"'}"
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$tests/test_wheel.py"
' wheel_test "$tmp/venv" "$tmp/raw/ringfeed/libringfeed.so.0" "$repo/python/tests" $hide || {
  echo "wheel_test: FAILED (or unshare/mount are not permitted here: it needs root or" \
       "unprivileged user namespaces)" >&2
  exit 1
}
echo "wheel_test: $wheel installs and reads its shards without the system's libraries"
