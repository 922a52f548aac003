"""Real photographs, not the generator's images: crops of Debian's mate-backgrounds photos at
every size from 200 to 900 px (datasets/photos.py), written by Python's tarfile.

Whichever engine decodes a sample (the CPU, GPU decode, the hardware decoders; here their host
stand-ins, which run the kernels' code), a run's pixels are the same: every path decodes at full
scale, exactly the CPU path's pixels with dct_scaling=False. A CPU-only run with DCT scaling
(the default) differs on the images it decoded at reduced scale, by the bound docs/gpu-decode.md
states. The GPU machine runs the same comparison on CUDA (python/tests/test_gpu.py)."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ringfeed
from conftest import REPO, with_restarts

IMAGES = 160

# The bound docs/gpu-decode.md states for DCT scaling against a full-scale decode, with room
# over what was measured (1,024 photo crops x 3 seeds at 224: max 35 levels, mean absolute
# difference 0.45 levels over the images that differ).
DCT_MAX_LEVELS = 64
DCT_MEAN_LEVELS = 2.0


@pytest.fixture(scope="module")
def photos(tmp_path_factory, lib):
    if not shutil.which("cjpeg") or not os.path.isdir("/usr/share/backgrounds/mate/nature"):
        pytest.skip("needs cjpeg/djpeg (libjpeg-turbo-progs) and mate-backgrounds "
                    "(tools/deps.sh installs both)")
    d = tmp_path_factory.mktemp("photos")
    subprocess.run([sys.executable, os.path.join(REPO, "datasets", "photos.py"), "--output",
                    str(d / "plain" / "p-%04d.tar"), "--images", str(IMAGES), "--per-shard",
                    "64", "--seed", "11"], check=True)
    plain = str(d / "plain" / "p-*.tar")
    return plain, with_restarts(plain, str(d / "restart"))


def collect(pattern, **kw):
    out = {}
    with ringfeed.Loader(pattern, batch_size=32, device="cpu", seed=3, decode_threads=2,
                         layout="NHWC", copy=True, **kw) as ld:
        for b in ld:
            for k, img, pad in zip(b.keys, b.images, b.is_padding):
                if not pad:
                    out[k] = np.asarray(img).copy()
        return out, ld.stats()


def test_every_path_gives_the_full_scale_pixels(photos):
    plain, restart = photos
    want, st = collect(plain, dct_scaling=False)
    assert len(want) == IMAGES and st["dct_scaled"] == 0
    runs = {
        "restart-marked, CPU": (restart, {"dct_scaling": False}),
        "gpu_decode": (restart, {"gpu_decode": True}),
        "gpu_decode 50%": (restart, {"gpu_decode": True, "gpu_decode_percent": 50}),
        "hw_decode_percent 100": (plain, {"hw_decode_percent": 100}),
        "hw 30% + gpu_decode": (restart, {"hw_decode_percent": 30, "gpu_decode": True}),
    }
    for name, (pattern, kw) in runs.items():
        got, st = collect(pattern, **kw)
        assert st["dct_scaled"] == 0, name
        if "gpu_decode" in kw and kw.get("gpu_decode_percent", 100) == 100:
            # every one took a GPU path (counts include the next epoch's prefetched samples)
            assert st["gpu_decoded"] + st["hw_decoded"] >= IMAGES, name
        bad = [k for k in want if not np.array_equal(want[k], got[k])]
        assert not bad, f"{name}: {len(bad)} of {IMAGES} differ from the full-scale CPU decode"


def test_dct_scaling_bound(photos):
    plain, _ = photos
    full, _ = collect(plain, dct_scaling=False)
    scaled, st = collect(plain)
    assert st["dct_scaled"] > 0  # crops of over 448 px in both sides exist in this set
    differ = 0
    for k in full:
        d = np.abs(full[k].astype(np.int16) - scaled[k].astype(np.int16))
        if d.any():
            differ += 1
            assert d.max() <= DCT_MAX_LEVELS and d.mean() <= DCT_MEAN_LEVELS, (k, d.max(), d.mean())
    assert 0 < differ <= st["dct_scaled"]
