"""Real photographs in the encodings users' files come in, not only the ones our tools write.

jpegtran rewrites the photo crops (datasets/photos.py) losslessly: the same DCT coefficients, so
libjpeg decodes every rewrite to the same pixels. Whatever the encoding, every path of the loader
must then give the same batches as the plain file: the CPU (full scale, and DCT-scaled), GPU
decode and the hardware decoders (their host stand-ins, which run the kernels' code), the two
mixed. A path that does not take an encoding (progressive, arithmetic-coded, non-interleaved
scans) leaves it to the CPU, whose full-scale pixels are the same. The restart transcode
(`ringfeed-pack --restart`, ringfeed.add_restarts) of every encoding decodes to them too.

Encodings that are not lossless rewrites of one another (chroma subsampling, grayscale) cannot
share a reference; for those each path must give the CPU's full-scale pixels of the same file.
A file missing only its EOI is refused by every path, naming the member and its offset."""
import glob
import os
import shutil
import struct
import subprocess
import tarfile

import numpy as np
import pytest

import ringfeed
from conftest import epoch_images, rewrite_shards
from test_photos import HW_MAX_LEVELS, HW_MEAN_LEVELS

IMAGES = 24
SIZE = 64
PATHS = {
    "CPU full scale": {"dct_scaling": False},
    "gpu_decode": {"gpu_decode": True},
    "hw_decode_percent 100": {"hw_decode_percent": 100},
    "gpu_decode + hw 40%": {"gpu_decode": True, "hw_decode_percent": 40},
}


def com(n):
    """A COM segment of n bytes of text."""
    return b"\xff\xfe" + (n + 2).to_bytes(2, "big") + b"c" * n


def before_sos(seg):
    return lambda j: j[:j.index(b"\xff\xda")] + seg + j[j.index(b"\xff\xda"):]


def exif_orientation(v):
    """An APP1 Exif segment after the SOI whose IFD0 holds Orientation = v (big-endian TIFF)."""
    tiff = b"MM\x00\x2a" + struct.pack(">I", 8) + struct.pack(">H", 1)
    tiff += struct.pack(">HHIH2x", 0x0112, 3, 1, v) + b"\x00" * 4
    seg = b"Exif\x00\x00" + tiff
    return lambda j: j[:2] + b"\xff\xe1" + struct.pack(">H", len(seg) + 2) + seg + j[2:]


def jpegtran(*args):
    return lambda j: subprocess.run(["jpegtran", *args], input=j, stdout=subprocess.PIPE,
                                    check=True).stdout


# name: bytes -> bytes, the same coefficients. Scan scripts: one component a scan (baseline
# but not interleaved), in another order, and luma alone then chroma together.
SCANS = {"noninterleaved": "0;\n1;\n2;\n", "noninterleaved_order": "2;\n0;\n1;\n",
         "split_chroma": "0;\n1 2;\n"}
LOSSLESS = {
    "optimized Huffman": jpegtran("-optimize"),
    "progressive": jpegtran("-progressive"),
    "progressive + restarts": jpegtran("-progressive", "-restart", "1"),
    "arithmetic": jpegtran("-arithmetic"),
    "restart every row": jpegtran("-restart", "1"),
    "restart every 7 MCUs": jpegtran("-restart", "7B"),
    "restart every MCU": jpegtran("-restart", "1B"),
    "64 KB COM segment": before_sos(com(65000)),
    "fill bytes before SOS": before_sos(b"\xff\xff\xff"),
    "trailer after EOI": lambda j: j + b"camera trailer " * 100,
    # the loader decodes pixels as stored: an orientation tag is not applied (docs/reliability.md)
    "EXIF orientation 6": exif_orientation(6),
    "a second SOI after EOI": lambda j: j + b"\xff\xd8\xff\xe0 junk",
}

# What neither the kernels nor the engines take: the CPU decodes them.
CPU_ONLY = {"progressive", "progressive + restarts", "arithmetic"}


def collect(pattern, device="cpu", **kw):
    """{key: image} of one epoch (seed 7, NHWC uint8, host copies) and the stats, with the
    epoch's own counts under "epoch"."""
    with ringfeed.Loader(pattern, 8, seed=7, size=SIZE, device=device, decode_threads=2,
                         layout="NHWC", copy=True, **kw) as ld:
        return epoch_images(ld), dict(ld.stats(), epoch=ld.epoch_stats())


def assert_same(got, want, what, engines=False):
    """got == want image by image; with engines (the GPU's hardware decoders took some), the
    images that differ only within their IDCT rounding (test_photos' bounds)."""
    assert sorted(got) == sorted(want), what
    bad = [k for k in want if not np.array_equal(got[k], want[k])]
    for k in bad if engines else []:
        d = np.abs(got[k].astype(np.int16) - want[k].astype(np.int16))
        assert d.max() <= HW_MAX_LEVELS and d.mean() <= HW_MEAN_LEVELS, (what, k, d.max())
    assert engines or not bad, f"{what}: {len(bad)} of {len(want)} images differ ({bad[:4]})"


@pytest.fixture(scope="module")
def base(photos, tmp_path_factory):
    """A shard of the first IMAGES photo crops (plain, 4:2:0, cjpeg) and the folder for its
    rewrites."""
    if not shutil.which("jpegtran"):
        pytest.skip("needs jpegtran (libjpeg-turbo-progs; tools/deps.sh installs it)")
    d = tmp_path_factory.mktemp("encodings")
    src = sorted(glob.glob(photos[0]))[0]
    out = str(d / "base.tar")
    with tarfile.open(src) as tin, tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as tout:
        members = [m for m in tin if m.isfile()]
        keys = sorted({m.name.rsplit(".", 1)[0] for m in members})[:IMAGES]
        for m in members:
            if m.name.rsplit(".", 1)[0] in keys:
                tout.addfile(m, tin.extractfile(m))
    return out, d


def rewrite(base, name, edit):
    path, d = base
    folder = str(d / name.replace(" ", "_").replace("+", "and"))
    return rewrite_shards(path, folder,
                          lambda m, data: edit(data) if m.endswith(".jpg") else data)


@pytest.fixture(scope="module")
def reference(base):
    """The plain file's batches: full scale, and the CPU's default (DCT-scaled)."""
    full, st = collect(base[0], dct_scaling=False)
    assert len(full) == IMAGES and st["dct_scaled"] == 0
    scaled, st = collect(base[0])
    assert st["dct_scaled"] > 0
    return full, scaled


def check_rewrite(base, reference, name, device="cpu", hw=True):
    """The rewrite `name` of the base shard on `device`: every path's batches are the plain
    file's full-scale CPU batches (the hardware decoders' within their rounding on a GPU, and
    only with hw), and on the host backend each path took what it is expected to take."""
    full, scaled = reference
    pattern = rewrite(base, name, LOSSLESS[name])
    if device == "cpu":
        got, _ = collect(pattern)
        assert_same(got, scaled, f"{name}, CPU with DCT scaling")
    for path, kw in PATHS.items():
        on_hw = "hw_decode_percent" in kw
        if on_hw and not hw:
            continue
        got, st = collect(pattern, device, **kw)
        assert st["dct_scaled"] == 0
        assert_same(got, full, f"{name}, {path} on {device}", engines=on_hw and device != "cpu")
        # which engine took them (the counts include what was decoded of the next epoch; on a
        # GPU the engines open beside the first batches, whose share goes elsewhere until then)
        if name in CPU_ONLY:
            assert st["gpu_decoded"] == st["hw_decoded"] == 0, (name, path)
        elif path == "gpu_decode" and name != "restart every 7 MCUs":
            assert st["gpu_decoded"] >= IMAGES, (name, path)  # (7 MCUs: where they divide a row)
        elif path == "hw_decode_percent 100" and device == "cpu":
            assert st["hw_decoded"] >= IMAGES, (name, path)


@pytest.mark.parametrize("name", list(LOSSLESS))
def test_lossless_rewrite_gives_the_same_batches_on_every_path(base, reference, name):
    check_rewrite(base, reference, name)


@pytest.mark.parametrize("name", sorted(SCANS))
def test_multi_scan_baseline_stays_on_the_cpu_with_the_same_pixels(base, reference, tmp_path,
                                                                   name):
    """Baseline files with more than one scan (each component alone, or luma then chroma):
    neither the kernels' walker nor the engines take them (stats), and every path gives the
    plain file's pixels."""
    full, _ = reference
    script = tmp_path / "scans.txt"
    script.write_text(SCANS[name])
    pattern = rewrite(base, name, jpegtran("-scans", str(script)))
    for path, kw in PATHS.items():
        got, st = collect(pattern, **kw)
        assert st["gpu_decoded"] == st["hw_decoded"] == 0, path
        assert_same(got, full, f"{name}, {path}")


def test_restart_transcode_of_every_encoding(base, reference):
    """ringfeed.add_restarts (ringfeed-pack --restart) of each encoding: the same pixels, and
    now every image a GPU decode packet (restart-marked baseline, whatever the input was)."""
    full, _ = reference
    for name, edit in LOSSLESS.items():
        pattern = rewrite(base, "restarts of " + name, lambda j: ringfeed.add_restarts(edit(j)))
        got, st = collect(pattern, gpu_decode=True)
        assert st["gpu_decoded"] >= IMAGES and st["gpu_plain_decoded"] == 0, name
        assert_same(got, full, f"add_restarts of {name}, gpu_decode")


SAMPLINGS = {"4:4:4": ["-sample", "1x1"], "4:2:2": ["-sample", "2x1"],
             "4:4:0": ["-sample", "1x2"], "4:1:1": ["-sample", "4x1"],
             "grayscale": ["-grayscale"]}


@pytest.mark.parametrize("name", list(SAMPLINGS))
def test_other_samplings_same_pixels_on_every_path(base, name):
    """The crops encoded again by cjpeg from their pixels with another chroma subsampling (or
    none, or grayscale): every path gives the CPU's full-scale pixels of the same file."""
    def encode(j):
        ppm = subprocess.run(["djpeg"], input=j, stdout=subprocess.PIPE, check=True).stdout
        return subprocess.run(["cjpeg", "-quality", "88", *SAMPLINGS[name]], input=ppm,
                              stdout=subprocess.PIPE, check=True).stdout
    pattern = rewrite(base, name, encode)
    full, _ = collect(pattern, dct_scaling=False)
    assert len(full) == IMAGES
    for path, kw in list(PATHS.items())[1:]:
        got, _ = collect(pattern, **kw)
        assert_same(got, full, f"{name}, {path}")


@pytest.mark.parametrize("path", list(PATHS))
def test_missing_eoi_is_refused_naming_member_and_offset(base, reference, path):
    """A file whose data is all there but whose EOI is missing cannot be told from one cut
    short: every path refuses it (PIL and djpeg call it truncated too), naming the member and
    its offset in the shard; under skip each is counted and every other image comes, with its
    pixels."""
    full, _ = reference
    cut = sorted(full)[::3]

    def edit(name, data):
        return data[:-2] if name[:-4] in cut and name.endswith(".jpg") else data
    pattern = rewrite_shards(base[0], str(base[1] / ("no_eoi_" + path.replace(" ", "_"))), edit)
    with pytest.raises(ringfeed.RingfeedError,
                       match=r"member \S+\.jpg at offset \d+: Premature end of JPEG file"):
        collect(pattern, **PATHS[path])
    got, st = collect(pattern, on_error="skip", **PATHS[path])
    ep = st["epoch"]
    assert ep["final"] and ep["skipped"] == len(cut) and ep["delivered"] == IMAGES - len(cut)
    assert ep["skipped_by_reason"]["corrupt"] == len(cut)
    assert_same(got, {k: v for k, v in full.items() if k not in cut}, f"no EOI, {path}")
