#!/usr/bin/env bash
# README command two: every test. Installs what is missing, then builds and runs the Check
# suites twice — a warnings-as-errors build, and an AddressSanitizer+UBSan build (leaks,
# use-after-free and hangs in destroy-mid-flight paths show up there) — then the Python tests.
# GPU suites exit 77 (skipped) on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
jobs=$(nproc)
cmake -S . -B build-test -DRINGFEED_WERROR=ON >/dev/null
cmake --build build-test -j"$jobs"
(cd build-test && ctest --output-on-failure -j"$jobs")
cmake -S . -B build-asan -DRINGFEED_WERROR=ON -DRINGFEED_SANITIZE='address;undefined' \
  -DRINGFEED_CUDA=OFF >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs")
# The Python binding against the -Werror build's library.
python3 -c 'import numpy, pytest' 2>/dev/null || python3 -m pip install -q numpy pytest
RINGFEED_LIB="$PWD/build-test/libringfeed.so" PYTHONPATH=python python3 -m pytest -q python/tests
