#!/usr/bin/env bash
# README command two: every test. Installs what is missing, then builds and runs the Check
# suites three times — a warnings-as-errors build, an AddressSanitizer+UBSan build (leaks,
# use-after-free and hangs in destroy-mid-flight paths show up there), and a ThreadSanitizer
# build of the threaded suites (data races between the I/O, decode and consumer threads) —
# then the libFuzzer targets briefly (FUZZ_SECONDS each, default 30), then the Python tests,
# then the binary wheel in a fresh venv.
# GPU suites exit 77 (skipped) on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
jobs=$(nproc)
# -DRINGFEED_TESTS=ON: a missing Check fails the configure here instead of leaving the suites
# out (AUTO, the default, would only say so).
cmake -S . -B build-test -DRINGFEED_WERROR=ON -DRINGFEED_TESTS=ON >/dev/null
cmake --build build-test -j"$jobs"
(cd build-test && ctest --output-on-failure -j"$jobs")
cmake -S . -B build-asan -DRINGFEED_WERROR=ON -DRINGFEED_SANITIZE='address;undefined' \
  -DRINGFEED_CUDA=OFF -DRINGFEED_TESTS=ON >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs")
# ThreadSanitizer: the suites that run the pipeline's threads (about 40 s on 2 cores). Any
# report fails the test (exitcode 66 from the Check child); tests/tsan.supp lists the
# suppressed false positives, each with its reason (none at present).
cmake -S . -B build-tsan -DRINGFEED_WERROR=ON -DRINGFEED_SANITIZE=thread -DRINGFEED_CUDA=OFF \
  -DRINGFEED_TESTS=ON >/dev/null
cmake --build build-tsan -j"$jobs"
(cd build-tsan && TSAN_OPTIONS="suppressions=$PWD/../tests/tsan.supp halt_on_error=1 \
  second_deadlock_stack=1" ctest --output-on-failure -j"$jobs" \
  -R 'loader|io|faults|tokens|memory|lifecycle|storage|hook|fields|boxes|lateskip|schedule|remote|shard_cache')
# Fuzzing (libFuzzer, clang): the tar parser (rf_tar_locate, rf_tar_locate_fields and the
# scanner) with the JSON label reader, the JPEG header/decode path, the PNG and WebP
# decoders and the box and keypoint readers (JSON and .npy), FUZZ_SECONDS each (30) over seeds made here from a generated shard and two JSON
# documents (tar, jpeg) and by PIL (png, webp: every colour type, interlaced, lossy and
# lossless).
fuzz_s=${FUZZ_SECONDS:-30}
CC=clang cmake -S . -B build-fuzz -DRINGFEED_FUZZ=ON -DRINGFEED_TESTS=OFF -DRINGFEED_TOOLS=OFF \
  -DRINGFEED_CUDA=OFF >/dev/null
cmake --build build-fuzz -j"$jobs"
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
mkdir -p "$seeds/tar" "$seeds/jpeg" "$seeds/png" "$seeds/webp" "$seeds/annot"
build-test/datasets/ringfeed-gen --output "$seeds/s-%02d.tar" --images 6 --per-shard 3 \
  --max-side 48 --seed 3 --quiet
# restart-marked seeds, large enough for the region path (src/decode/jpeg_restart.c) to be taken
build-test/datasets/ringfeed-gen --output "$seeds/r-%02d.tar" --images 4 --per-shard 4 \
  --max-side 160 --seed 4 --restart --quiet
python3 - "$seeds" <<'PY'
import glob, os, sys, tarfile
d = sys.argv[1]
for i, path in enumerate(sorted(glob.glob(os.path.join(d, "[rs]-*.tar")))):
    data = open(path, "rb").read()
    open(os.path.join(d, "tar", f"shard{i}"), "wb").write(data)
    with tarfile.open(path) as tf:
        for m in tf:
            if m.name.endswith(".jpg"):
                jpg = tf.extractfile(m).read()
                for sel in (0, 0x35):  # first byte: the transform the target applies
                    open(os.path.join(d, "jpeg", f"{m.name}.{sel}"), "wb").write(bytes([sel]) + jpg)
                # one sample's span alone: what rf_tar_locate sees
                open(os.path.join(d, "tar", m.name), "wb").write(data[m.offset:m.offset_data + ((m.size + 511) // 512) * 512])
# JSON label members (fuzz_tar reads its whole input as one too, path a.class_id)
for i, doc in enumerate((b'{"a": {"class_id": 7}, "caption": "caf\\u00e9 \\ud83d\\ude00"}',
                         b' [1.5e-3, -0, {"a": null}, true, false, "\\"q\\""]\n')):
    open(os.path.join(d, "tar", f"json{i}"), "wb").write(doc)
# box and keypoint members (fuzz_annot: paths b, a.bbox with a.c, k; and .npy)
import struct
for i, doc in enumerate((b'{"b": [[1, 2, 3, 4], [0.5, 1e-2, 7, 8.25]], "k": [[1, 2], [3, 4, 2]]}',
                         b'{"a": [{"bbox": [1, 2, 3, 4], "c": 3}, {"bbox": [0, 0, 1, 1], "c": 0}]}')):
    open(os.path.join(d, "annot", f"json{i}"), "wb").write(doc)
for i, (fmt, rows, cols) in enumerate((("f", 3, 4), ("d", 2, 5))):  # as np.save writes them
    hdr = "{'descr': '<%s', 'fortran_order': False, 'shape': (%d, %d), }" % (
        "f4" if fmt == "f" else "f8", rows, cols)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    body = struct.pack("<%d%s" % (rows * cols, fmt), *range(rows * cols))
    npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + body
    open(os.path.join(d, "annot", f"npy{i}"), "wb").write(npy)
PY
python3 -c 'import PIL' 2>/dev/null || python3 -m pip install -q pillow
python3 - "$seeds" <<'PY'
import io, os, sys
from PIL import Image
d = sys.argv[1]
base = Image.radial_gradient("L").resize((40, 30)).convert("RGB")
pics = {"rgb": base, "rgba": base.convert("RGBA"), "gray": base.convert("L"),
        "la": base.convert("LA"), "pal": base.quantize(16), "i16": base.convert("I;16")}
for name, im in pics.items():
    for kind, fmt, kw in (("png", "PNG", {}), ("webp", "WEBP", {"quality": 70}),
                          ("webp", "WEBP", {"lossless": True})):
        if fmt == "WEBP" and name in ("i16", "la", "pal"):
            continue
        out = io.BytesIO()
        im.save(out, fmt, **kw)
        tag = f"{name}-{'ll' if kw.get('lossless') else 'l'}"
        open(os.path.join(d, kind, tag), "wb").write(bytes([0x35]) + out.getvalue())
PY
for t in tar jpeg png webp annot; do
  build-fuzz/tests/fuzz/fuzz_$t -max_total_time="$fuzz_s" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 "$seeds/$t" 2>&1 | tail -n 3
done
# The Python binding against the -Werror build's library.
python3 -c 'import numpy, pytest' 2>/dev/null || python3 -m pip install -q numpy pytest
# webdataset: python/tests/test_labels.py reads shards its TarWriter wrote (skipped without).
python3 -c 'import webdataset' 2>/dev/null || python3 -m pip install -q webdataset ||
    echo "test.sh: no webdataset; its cases in python/tests/test_labels.py will be skipped" >&2
# matplotlib: python/tests/test_report.py renders docs/performance.md as tools/perf_report.py
# does; without it those tests are skipped.
python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install -q matplotlib ||
    echo "test.sh: no matplotlib; python/tests/test_report.py will be skipped" >&2
RINGFEED_LIB="$PWD/build-test/libringfeed.so" PYTHONPATH=python python3 -m pytest -q python/tests
# The binary wheel (tools/wheel.sh) installed into a fresh venv and run with the system's
# liburing, libjpeg, libspng and libwebp hidden (a few minutes).
tests/wheel_test.sh
