"""Real photographs, not the generator's images: crops of Debian's mate-backgrounds photos at
every size from 200 to 900 px (datasets/photos.py), written by Python's tarfile.

Whichever engine decodes a sample (the CPU, GPU decode, the hardware decoders; here their host
stand-ins, which run the kernels' code), a run's pixels are the same: every path decodes at full
scale, exactly the CPU path's pixels with dct_scaling=False. A CPU-only run with DCT scaling
(the default) differs on the images it decoded at reduced scale, by the bound docs/gpu-decode.md
states. The GPU machine runs the same comparison on CUDA (python/tests/test_gpu.py)."""
import numpy as np

import ringfeed
from conftest import PHOTOS as IMAGES, epoch_images

# The hardware decoders on a GPU: nvJPEG does not promise libjpeg's islow IDCT to the bit
# (tests/test_cuda.c allows the same; the host stand-in is exact).
HW_MAX_LEVELS = 2
HW_MEAN_LEVELS = 0.02

# The bound docs/gpu-decode.md states for DCT scaling against a full-scale decode, with room
# over what was measured (1,024 photo crops x 3 seeds at 224: max 35 levels, mean absolute
# difference 0.45 levels over the images that differ).
DCT_MAX_LEVELS = 64
DCT_MEAN_LEVELS = 2.0


def collect(pattern, device="cpu", **kw):
    """{key: image} of one epoch (NHWC uint8, host copies) and the loader's stats."""
    with ringfeed.Loader(pattern, batch_size=32, device=device, seed=3, decode_threads=2,
                         layout="NHWC", copy=True, **kw) as ld:
        return epoch_images(ld), ld.stats()


def check_every_path(photos, device, hw=True, size=224):
    """Every engine's batches equal the CPU's full-scale ones, on `device` (the hardware
    decoders' runs only with hw, and within their IDCT rounding on a GPU), at output `size`
    (a side, or (height, width))."""
    plain, restart = photos
    want, st = collect(plain, device, dct_scaling=False, size=size)
    assert len(want) == IMAGES and st["dct_scaled"] == 0
    runs = {
        "restart-marked, CPU": (restart, {"dct_scaling": False}),
        "gpu_decode": (restart, {"gpu_decode": True}),
        "gpu_decode 50%": (restart, {"gpu_decode": True, "gpu_decode_percent": 50}),
        "hw_decode_percent 100": (plain, {"hw_decode_percent": 100}),
        "hw 30% + gpu_decode": (restart, {"hw_decode_percent": 30, "gpu_decode": True}),
    }
    for name, (pattern, kw) in runs.items():
        on_hw = "hw_decode_percent" in kw
        if on_hw and not hw:
            continue
        got, st = collect(pattern, device, size=size, **kw)
        assert st["dct_scaled"] == 0, name
        if "gpu_decode" in kw and kw.get("gpu_decode_percent", 100) == 100:
            # every one took a GPU path (counts include the next epoch's prefetched samples)
            assert st["gpu_decoded"] + st["hw_decoded"] >= IMAGES, name
        bad = [k for k in want if not np.array_equal(want[k], got[k])]
        if on_hw and device != "cpu":
            for k in bad:
                d = np.abs(want[k].astype(np.int16) - got[k].astype(np.int16))
                assert d.max() <= HW_MAX_LEVELS and d.mean() <= HW_MEAN_LEVELS, (name, k, d.max())
            print(f"{name}: {len(bad)} of {IMAGES} within the engine's rounding, the rest exact")
            continue
        assert not bad, f"{name}: {len(bad)} of {IMAGES} differ from the full-scale CPU decode"


def test_every_path_gives_the_full_scale_pixels(photos):
    check_every_path(photos, "cpu")


def test_every_path_gives_the_full_scale_pixels_non_square(photos):
    check_every_path(photos, "cpu", size=(160, 224))
    check_every_path(photos, "cpu", size=(224, 96))


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
