#!/usr/bin/env bash
# The binary wheel on a machine without ringfeed's runtime libraries (issues 21 and 45;
# tools/test.sh runs it after pytest, a few minutes): tools/wheel.sh builds and repairs it,
# tools/wheel_bundle.py checks what it bundles (the allow-list, a licence text and an SBOM
# component for each), a fresh venv in a temporary folder installs it (numpy and pytest from
# PyPI), then in a mount namespace where every liburing, libjpeg, libspng, libwebp, libcurl,
# libnghttp2, libssl and libcrypto file that `ldconfig -p` lists is /dev/null (a load that
# reached one fails), from a temporary cwd with no RINGFEED_LIB or PYTHONPATH and the venv's
# bin/ first on PATH, python/tests/test_wheel.py imports the installed package, reads shards
# generated beforehand for one epoch, from disk and over HTTP, HTTPS (HTTP/2) and S3 (nginx and
# moto from tests/servers/servers.py, started outside the namespace), checks the installed
# licence texts and SBOM, and runs ringfeed-gen, -inspect, -pack and -bench from PATH. Before
# that, the same namespace must refuse the system's liburing and libcurl and the unrepaired
# wheel's library, or the hiding proves nothing and the test fails.
# Needs build-test/datasets/ringfeed-gen (tools/test.sh builds it) or RINGFEED_GEN, and nginx
# and moto (tools/deps.sh).
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
python3 tools/wheel_bundle.py check "$wheel"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q "$wheel" pytest
"$gen" --output "$tmp/shards/train-%06d.tar" --images 40 --classes 5 --per-shard 16 --seed 21 \
  --max-side 64 --quiet
"$tmp/venv/bin/python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("ringfeed/libringfeed.so.0", sys.argv[2])' \
  "$raw" "$tmp/raw"

# The files behind the libraries' names, each once.
hide=$(ldconfig -p |
       awk '$1 ~ /^lib(uring|jpeg|spng|webp|curl|nghttp2|ssl|crypto)[a-z-]*\.so/ {print $NF}' |
       xargs -r readlink -f | sort -u)
[ -n "$hide" ] || { echo "wheel_test: ldconfig -p lists none of the libraries to hide" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then
  ns=(unshare --mount)
else
  ns=(unshare -rm)  # an unprivileged user namespace with its own mounts
fi
mkdir "$tmp/cwd" "$tmp/state"
# The servers run outside the namespace (nginx and moto need the libraries it hides) and write
# their addresses to $tmp/state/env, which the tests read.
# shellcheck disable=SC2016 # expanded by the inner shell
python3 tests/servers/servers.py --root "$tmp/shards" --state "$tmp/state" --only http,https,s3 \
  --s3-upload -- "${ns[@]}" env -i PATH="$tmp/venv/bin:/usr/bin:/bin" HOME="$tmp" \
  RINGFEED_TEST_INSTALLED=1 RINGFEED_WHEEL_SHARDS="$tmp/shards/train-*.tar" \
  RINGFEED_WHEEL_SERVERS="$tmp/state/env" bash -euo pipefail -c '
  venv=$1 raw=$2 tests=$3
  shift 3
  for f in "$@"; do mount --bind /dev/null "$f"; done
  cd "$(dirname "$venv")/cwd"
  for lib in liburing.so.2 libcurl.so.4; do
    if "$venv/bin/python" -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$lib" 2>/dev/null; then
      echo "wheel_test: the system $lib still loads: the libraries are not hidden" >&2
      exit 1
    fi
  done
  if out=$("$venv/bin/python" -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$raw" 2>&1); then
    echo "wheel_test: the unrepaired library loads with the libraries hidden" >&2
    exit 1
  fi
  echo "hidden: $*"
  echo "the unrepaired wheel'"'"'s library in this namespace: ${out##*$'"'"'\n'"'"'}"
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$tests/test_wheel.py"
' wheel_test "$tmp/venv" "$tmp/raw/ringfeed/libringfeed.so.0" "$repo/python/tests" $hide || {
  rc=$?
  if [ $rc -eq 77 ]; then
    echo "wheel_test: FAILED: nginx or moto is missing (tools/deps.sh installs them)" >&2
  else
    echo "wheel_test: FAILED (or unshare/mount are not permitted here: it needs root or" \
         "unprivileged user namespaces)" >&2
  fi
  exit 1
}
echo "wheel_test: $wheel installs, reads its shards (local, HTTP, HTTPS, S3) and runs its" \
     "commands without the system's libraries, and accounts for everything it bundles"
