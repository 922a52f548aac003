"""Bad files among dense real photographs, on every decode path: each path gives the CPU's
verdicts. A shard of 60 samples, 40 photos of datasets/photos.py's dense profile and 20 of them
damaged in 20 ways (cut short with and without an EOI, headers cut or missing tables, markers in
the scan, bytes overwritten, ...), is read with on_error="skip" for two epochs by the CPU
schedule at full scale and by every GPU path: the same samples are delivered in each epoch and
the same ones skipped, counted under the same reasons. Here the GPU paths run their host code
(the kernels' decode and the engines' check: what a sample's verdict depends on); test_gpu.py
runs the same on a GPU, where the kernels and the hardware decoders' verdicts come late."""
import glob
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile

import pytest

import ringfeed
from conftest import PHOTO_SOURCES, REPO

GOOD = 40


def segments(data):
    """[(marker, offset of its 0xFF, segment length incl. marker)] of the segments before the
    scan's data, and the offset where the scan's data start."""
    out, pos = [], 2
    while pos + 4 <= len(data):
        m = data[pos + 1]
        n = int.from_bytes(data[pos + 2:pos + 4], "big")
        out.append((m, pos, n + 2))
        pos += n + 2
        if m == 0xDA:
            return out, pos
    raise ValueError("no scan")


def without(data, marker):
    """data with every segment of `marker` taken out."""
    segs, _ = segments(data)
    keep, last = b"", 0
    for m, at, n in segs:
        if m == marker:
            keep += data[last:at]
            last = at + n
    return keep + data[last:]


def patch(data, at, new):
    return data[:at] + new + data[at + len(new):]


def sof(data):
    return next((at for m, at, _ in segments(data)[0] if 0xC0 <= m <= 0xC2), None)


def damaged(photos, progressive):
    """20 bad files, each from its own baseline photo (one from a progressive one)."""
    rng = random.Random(5)
    it = iter(photos)
    out = {}

    def scan_at(frac):
        d = next(it)
        s = segments(d)[1]
        return d, s + int((len(d) - s) * frac)

    d = next(it)
    out["cut_600_eoi"] = d[:600] + b"\xff\xd9"
    d = next(it)
    out["cut_half_eoi"] = d[:len(d) // 2] + b"\xff\xd9"
    d = next(it)
    out["cut_90pct_eoi"] = d[:len(d) * 9 // 10] + b"\xff\xd9"
    d = next(it)
    out["cut_half"] = d[:len(d) // 2]
    d = next(it)
    out["cut_in_header"] = d[:segments(d)[1] // 2]
    out["empty"] = b""
    out["not_an_image"] = b"no image here, " * 20
    out["soi_only"] = b"\xff\xd8"
    d, at = scan_at(0.05)
    out["eoi_in_scan"] = patch(d, at, b"\xff\xd9")
    d, at = scan_at(0.1)
    out["rst_in_plain_scan"] = d[:at] + b"\xff\xd0" + d[at:]
    out["no_quant_tables"] = without(next(it), 0xDB)
    d = next(it)
    out["height_doubled"] = patch(d, sof(d) + 5,
                                  (2 * int.from_bytes(d[sof(d) + 5:sof(d) + 7], "big"))
                                  .to_bytes(2, "big"))
    d = next(it)
    out["width_zero"] = patch(d, sof(d) + 7, b"\x00\x00")
    d = next(it)
    dht = next(at for m, at, _ in segments(d)[0] if m == 0xC4)
    out["bogus_huffman_table"] = patch(d, dht + 5, b"\xff" * 16)
    d = next(it)
    sos = segments(d)[1] - (segments(d)[0][-1][2])
    out["scan_names_no_component"] = patch(d, sos + 5, b"\x09")
    d, at = scan_at(0.3)
    out["zero_run"] = patch(d, at, bytes(256))
    d, at = scan_at(0.2)
    out["bytes_overwritten"] = patch(d, at, bytes(rng.randrange(256) & 0xFE for _ in range(16)))
    d, at = scan_at(0.25)
    out["ff00_run"] = patch(d, at, b"\xff\x00" * 64)
    p = progressive[0]
    out["progressive_cut_eoi"] = p[:len(p) // 2] + b"\xff\xd9"
    d = next(it)
    out["junk_before_eoi"] = d[:-2] + b"\x17" * 64 + b"\xff\xd9"
    assert len(out) == 20
    return out


def frame(data):
    """(progressive, sampling factors) of a JPEG."""
    for m, at, n in segments(data)[0]:
        if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
            nc = data[at + 9]
            return m == 0xC2, tuple(data[at + 11 + 3 * i] for i in range(nc))
    return None, None


@pytest.fixture(scope="module")
def bad_shard(tmp_path_factory, lib):
    """One shard: GOOD dense photos and the 20 damaged files in a fixed shuffle, KEY.jpg +
    KEY.cls each (python's tarfile); returns (pattern, {key: kind} of the damaged)."""
    if not shutil.which("cjpeg") or not glob.glob(PHOTO_SOURCES):
        pytest.skip("needs cjpeg/djpeg (libjpeg-turbo-progs) and photographs (mate-backgrounds; "
                    "tools/deps.sh installs both)")
    pytest.importorskip("numpy")
    d = tmp_path_factory.mktemp("badfiles")
    subprocess.run([sys.executable, os.path.join(REPO, "datasets", "photos.py"), "--profile",
                    "dense", "--output", str(d / "src-%04d.tar"), "--images", "96",
                    "--per-shard", "96", "--seed", "8", "--max-side", "700", "--sources",
                    PHOTO_SOURCES], check=True)
    with tarfile.open(str(d / "src-0000.tar")) as tf:
        jpgs = [tf.extractfile(m).read() for m in tf if m.name.endswith(".jpg")]
    baseline = [j for j in jpgs if frame(j)[0] is False]
    progressive = [j for j in jpgs if frame(j)[0]]
    assert len(baseline) >= GOOD + 20 and progressive
    bad = damaged(baseline[GOOD:], progressive)
    samples = [(f"{i:04d}good", j) for i, j in enumerate(baseline[:GOOD - 1] + progressive[:1])]
    samples += [(f"{i:04d}{k}", v) for i, (k, v) in enumerate(bad.items())]
    random.Random(3).shuffle(samples)
    path = d / "bad-0000.tar"
    with tarfile.open(str(path), "w", format=tarfile.GNU_FORMAT) as tf:
        for i, (key, data) in enumerate(samples):
            for name, blob in ((key + ".jpg", data), (key + ".cls", str(i % 5).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(blob)
                tf.addfile(info, io.BytesIO(blob))
    return str(d / "bad-*.tar"), {k: k[4:] for k, _ in samples if not k.endswith("good")}


def verdicts(pattern, device="cpu", epochs=2, **kw):
    """Each epoch's delivered keys and its skip counts by reason (the epoch's own: stats()
    would count the next epoch's samples decoded ahead too)."""
    out = []
    with ringfeed.Loader(pattern, batch_size=8, device=device, seed=7, decode_threads=2,
                         on_error="skip", size=96, **kw) as ld:
        for _ in range(epochs):
            keys = sorted(k for b in ld for k, pad in zip(b.keys, b.is_padding) if not pad)
            st = ld.epoch_stats()
            assert st["final"] and st["delivered"] + st["skipped"] == st["total"]
            out.append((keys, dict(st["skipped_by_reason"])))
    return out


PATHS = {
    "gpu_decode": {"gpu_decode": True},
    "hw_decode_percent 100": {"hw_decode_percent": 100},
    "hw 30% + gpu_decode": {"hw_decode_percent": 30, "gpu_decode": True},
}


def check_paths(bad_shard, device, paths):
    pattern, bad = bad_shard
    want = verdicts(pattern, device, schedule="cpu", dct_scaling=False)
    # the kinds that lose pixels whatever the crop are refused in every epoch, and every good
    # photo is delivered
    for kind in ("cut_600_eoi", "cut_half_eoi", "cut_half", "cut_in_header", "empty",
                 "not_an_image", "soi_only", "eoi_in_scan", "rst_in_plain_scan",
                 "no_quant_tables", "width_zero", "bogus_huffman_table",
                 "scan_names_no_component"):
        key = next(k for k, v in bad.items() if v == kind)
        assert all(key not in keys for keys, _ in want), kind
    for keys, _ in want:
        assert sum(k.endswith("good") for k in keys) == GOOD
    for name, kw in paths.items():
        got = verdicts(pattern, device, **kw)
        for e, ((wk, wr), (gk, gr)) in enumerate(zip(want, got)):
            assert gk == wk, (name, e, sorted(set(wk) ^ set(gk)))
            assert gr == wr, (name, e, gr, wr)


def test_bad_files_get_the_cpus_verdicts_on_every_path(bad_shard):
    check_paths(bad_shard, "cpu", PATHS)


@pytest.fixture(scope="module")
def recovered_shard(bad_shard, tmp_path_factory):
    """One shard of 8 clean dense photos (KEY "NNNNclean") and beside each a copy that libjpeg
    decodes to the same pixels after recovering from its header: junk bytes after the SOI, or a
    comment segment whose length field says 0 ("NNNNjunk")."""
    src = os.path.join(os.path.dirname(bad_shard[0]), "src-0000.tar")
    with tarfile.open(src) as tf:
        jpgs = [tf.extractfile(m).read() for m in tf if m.name.endswith(".jpg")]
    clean = [j for j in jpgs if frame(j)[0] is False][:8]
    d = tmp_path_factory.mktemp("recovered")
    with tarfile.open(str(d / "r-0000.tar"), "w", format=tarfile.GNU_FORMAT) as tf:
        for i, j in enumerate(clean):
            odd = (j[:2] + b"\x12\x34\x56" + j[2:] if i % 2 else
                   j[:2] + b"\xff\xfe\x00\x00a comment" + j[2:])
            for key, data in ((f"{i:04d}clean", j), (f"{i:04d}junk", odd)):
                for name, blob in ((key + ".jpg", data), (key + ".cls", b"1")):
                    info = tarfile.TarInfo(name)
                    info.size = len(blob)
                    tf.addfile(info, io.BytesIO(blob))
    return str(d / "r-*.tar")


def center_images(pattern, device="cpu", **kw):
    """{key: image} of one epoch, center crops without flips (the same for every sample)."""
    from conftest import epoch_images
    with ringfeed.Loader(pattern, batch_size=4, device=device, crop="center", size=96,
                         decode_threads=2, layout="NHWC", copy=True, **kw) as ld:
        return epoch_images(ld)


def check_recovered(pattern, device, paths):
    """Each recovered file's image is its clean twin's on every path; on a GPU within the
    hardware decoders' rounding where they may have taken one twin and not the other (nvJPEG
    does not promise libjpeg's IDCT to the bit: test_photos.py's bound)."""
    for name, kw in [("cpu", {"schedule": "cpu", "dct_scaling": False})] + list(paths.items()):
        got = center_images(pattern, device, **kw)
        assert len(got) == 16, name
        engines = device != "cpu" and ("hw_decode_percent" in kw or not kw)
        for key in got:
            if key.endswith("junk"):
                d = abs(got[key].astype(int) - got[key[:4] + "clean"].astype(int))
                assert d.max() <= (2 if engines else 0), (name, key, d.max())


def bench_recovered(pattern, device, paths):
    """The bench's one epoch on each path counts the 8 files under recovered_by_kind
    header_bytes, once each, whichever path decoded them."""
    from conftest import find_tool
    bench = find_tool("tools", "ringfeed-bench", "RINGFEED_BENCH")
    if bench is None:
        pytest.skip("ringfeed-bench not found")
    for args in paths:
        out = subprocess.run([bench, "--shards", pattern, "--device", device, "--batch", "4",
                              "--threads", "2", "--epochs", "1", "--json", *args],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        assert r["recovered"] == 8 and r["recovered_by_kind"]["header_bytes"] == 8, (args, r)


def test_files_libjpeg_recovers_from_are_decoded_on_every_path(recovered_shard):
    """Every path delivers them with their clean twin's pixels, and counts them."""
    check_recovered(recovered_shard, "cpu", PATHS)
    bench_recovered(recovered_shard, "host", ([], ["--gpu-decode"], ["--hw-decode", "100"]))


def test_recovered_kinds_are_the_librarys():
    from ringfeed import _capi as C
    from ringfeed.loader import RECOVERED_KINDS
    names = tuple(C.lib().rf_recovered_name(i).decode() for i in range(len(RECOVERED_KINDS)))
    assert names == RECOVERED_KINDS
    assert C.lib().rf_recovered_name(len(RECOVERED_KINDS)) is None
