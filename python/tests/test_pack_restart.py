"""ringfeed-pack --restart never changes a decoded pixel (docs/python.md, tools/pack.c): a
progressive JPEG whose scans stop before every coefficient is complete (cjpeg -scans writes
such files; so do truncated progressive downloads that were repaired) is decoded by libjpeg with
block smoothing, which a baseline rewrite would not get, so it is kept as it is and counted in
pack's summary; every other JPEG is rewritten with restart markers. The batches of the
--restart pack equal the plain pack's at full scale. ringfeed.add_restarts returns such a file
as given."""
import io
import json
import os
import shutil
import subprocess
import tarfile

import numpy as np
import pytest

import ringfeed
from conftest import find_tool

# DC first, then only the two lowest AC coefficients: the rest of every block is never sent
# (djpeg's pixels of such a file and of its baseline rewrite differ by up to 32 levels).
INCOMPLETE_SCANS = "0,1,2: 0-0, 0, 0 ;\n0: 1-2, 0, 0 ;\n1: 1-2, 0, 0 ;\n2: 1-2, 0, 0 ;\n"


def photo(seed, w=200, h=150):
    """A photo-like RGB image (smooth shapes and noise): block smoothing shows on it."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 1.3 + y) % 256, (y * 1.7) % 256, (x * y / 50) % 256], axis=-1)
    return np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)


def cjpeg(img, *args):
    if not shutil.which("cjpeg"):
        pytest.skip("cjpeg not installed (libjpeg-turbo-progs)")
    h, w, _ = img.shape
    ppm = b"P6\n%d %d\n255\n" % (w, h) + img.tobytes()
    r = subprocess.run(["cjpeg", "-quality", "90", *args], input=ppm, capture_output=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def collect(pattern):
    """{key: image} of one full-scale epoch in file order."""
    with ringfeed.Loader(pattern, 1, size=96, crop="center", device="cpu", array_type="numpy",
                         shuffle=False, dct_scaling=False, decode_threads=1) as ld:
        return {k: np.array(img, copy=True) for b in ld for k, img in zip(b.keys, b.images)}


def members(pattern_dir):
    out = {}
    for name in sorted(os.listdir(pattern_dir)):
        if name.endswith(".tar"):
            with tarfile.open(os.path.join(pattern_dir, name)) as tf:
                for m in tf:
                    out[m.name] = tf.extractfile(m).read()
    return out


def test_restart_keeps_incomplete_progressive_jpegs(tmp_path):
    pack = find_tool("tools", "ringfeed-pack", "RINGFEED_PACK")
    if pack is None:
        pytest.skip("ringfeed-pack not found (build it, or set RINGFEED_PACK)")
    scans = tmp_path / "scans.txt"
    scans.write_text(INCOMPLETE_SCANS)
    files = {"base": cjpeg(photo(1)), "prog": cjpeg(photo(2), "-progressive"),
             "cut": cjpeg(photo(3), "-scans", str(scans))}
    src = tmp_path / "in" / "c0"
    src.mkdir(parents=True)
    for k, data in files.items():
        (src / f"{k}.jpg").write_bytes(data)
    runs = {}
    for how in ("plain", "restart"):
        out = tmp_path / how
        out.mkdir()
        r = subprocess.run([pack, "--input", str(tmp_path / "in"), "--output",
                            str(out / "s-%d.tar"), "--quiet", "--json"]
                           + (["--restart"] if how == "restart" else []),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        runs[how] = (json.loads(r.stdout.strip().splitlines()[-1]), members(str(out)),
                     collect(str(out / "s-*.tar")), r.stderr)
    summary, got, px, _ = runs["restart"]
    assert summary["restart_kept"] == 1 and runs["plain"][0]["restart_kept"] == 0
    assert got["c0/cut.jpg"] == files["cut"]  # kept byte for byte
    for k in ("base", "prog"):  # rewritten: restart markers (a DRI segment) now
        assert got[f"c0/{k}.jpg"] != files[k] and b"\xff\xdd" in got[f"c0/{k}.jpg"]
    plain = runs["plain"][2]
    assert sorted(px) == sorted(plain)
    for k in plain:
        assert np.array_equal(px[k], plain[k]), k
    # the library call returns such a file as given
    assert ringfeed.add_restarts(files["cut"]) == files["cut"]
    assert ringfeed.add_restarts(files["prog"]) != files["prog"]
