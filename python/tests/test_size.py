"""Non-square output, size=(height, width): shapes in both layouts, the old size=N keyword
unchanged, argument errors, and the pixels against torchvision's transforms as they run on a
PIL image (Resize + CenterCrop, RandomResizedCrop), written out here with PIL because
torchvision's PIL path is exactly PIL's antialiased bilinear resize and integer crops."""

import numpy as np
import pytest

import ringfeed
from conftest import shard_sources

KW = dict(device="cpu", decode_threads=2, array_type="numpy", seed=4)


def epoch(pattern, **kw):
    """{key: image} of one epoch (host copies, padding left out)."""
    out = {}
    with ringfeed.Loader(pattern, 8, copy=True, **dict(KW, **kw)) as ld:
        for b in ld:
            for k, img, pad in zip(b.keys, b.images, b.is_padding):
                if not pad:
                    out[k] = np.array(img)
    return out


@pytest.mark.parametrize("hw", [(16, 40), (40, 16)])
def test_shapes_in_both_layouts(shards, hw):
    h, w = hw
    with ringfeed.Loader(shards, 8, size=hw, layout="NCHW", **KW) as ld:
        b = next(iter(ld))
        assert b.images.shape == (8, 3, h, w)
    with ringfeed.Loader(shards, 8, size=hw, layout="NHWC", dtype="float32", **KW) as ld:
        b = next(iter(ld))
        assert b.images.shape == (8, h, w, 3) and b.images.dtype == np.float32
    nchw = epoch(shards, size=hw, layout="NCHW")
    nhwc = epoch(shards, size=hw, layout="NHWC")
    assert nchw.keys() == nhwc.keys()
    for k in nchw:
        assert np.array_equal(nchw[k], nhwc[k].transpose(2, 0, 1)), k


def test_square_tuple_is_the_side(shards):
    a, b = epoch(shards, size=24), epoch(shards, size=(24, 24))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    with ringfeed.Loader(shards, 8, size=(24, 40), **KW) as ld:
        cfg = ld.config
        assert (cfg["image_height"], cfg["image_width"]) == (24, 40)
        assert cfg["resize_shorter"] == round(40 * 256 / 224)


@pytest.mark.parametrize("size, err, match", [
    ((0, 24), ValueError, r"size\[0\]=0 is out of range 1..8192"),
    ((24, 8193), ValueError, r"size\[1\]=8193 is out of range 1..8192"),
    ((24, 24, 3), ValueError, "size must be an integer or \\(height, width\\)"),
    ((24.0, 24), TypeError, r"size\[0\] must be an integer"),
])
def test_size_errors(shards, size, err, match):
    with pytest.raises(err, match=match):
        ringfeed.Loader(shards, 8, size=size, **KW)


def tv_resize_center_crop(img, R, h, w):
    """torchvision's Resize(R) (shorter side to R, the longer int(R * long / short)) then
    CenterCrop((h, w)) (top and left rounded), on a PIL image."""
    from PIL import Image
    W, H = img.size
    nw, nh = (R, int(R * H / W)) if W <= H else (int(R * W / H), R)
    img = img.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - h) / 2.0)), int(round((nw - w) / 2.0))
    return np.asarray(img.crop((left, top, left + w, top + h)))


def compare(got, want, max_levels, mean_levels):
    assert got.keys() <= want.keys() and got
    worst_max = worst_mean = 0.0
    for k, img in got.items():
        d = np.abs(img.astype(np.int16) - want[k].astype(np.int16))
        worst_max, worst_mean = max(worst_max, d.max()), max(worst_mean, d.mean())
    assert worst_max <= max_levels and worst_mean <= mean_levels, (worst_max, worst_mean)


# PIL resizes horizontally first and rounds to uint8 between the passes, ringfeed vertically
# first (both with 8-bit intermediates), so pixels may differ by the two roundings: measured on
# the 160 photos at 160x224 and 224x96, at most 1 level and a mean of 0.175 per image in both
# tests; the bounds leave room for other photographs (RINGFEED_PHOTO_SOURCES).
@pytest.mark.parametrize("hw", [(160, 224), (224, 96)])
def test_center_crop_is_torchvision_resize_center_crop(photos, hw):
    pytest.importorskip("PIL")
    plain, _ = photos
    h, w = hw
    R = round(max(h, w) * 256 / 224)
    got = epoch(plain, size=hw, crop="center", layout="NHWC", dct_scaling=False)
    src = shard_sources(plain)
    compare(got, {k: tv_resize_center_crop(src[k], R, h, w) for k in got}, 2, 0.5)


def tv_whole_image_crop(img, got, h, w):
    """torchvision's RandomResizedCrop((h, w), scale=(1, 1)) of img: the whole image, or,
    when an attempt's rounded side lands on the image's aspect, the image less one row or
    column (the attempt's random offset 0 or 1), cropped and then resized to h x w. The
    candidate nearest got."""
    from PIL import Image
    W, H = img.size
    boxes = [(0, 0, W, H), (0, 0, W, H - 1), (0, 1, W, H), (0, 0, W - 1, H), (1, 0, W, H)]
    refs = [np.asarray(img.crop(b).resize((w, h), Image.BILINEAR)) for b in boxes]
    return min(refs, key=lambda r: np.abs(r.astype(np.int16) - got.astype(np.int16)).max())


@pytest.mark.parametrize("hw", [(160, 224), (224, 96)])
def test_random_resized_crop_of_the_whole_image_is_torchvision(photos, hw):
    """scale=(1, 1) with a ratio range holding every photo's own: RandomResizedCrop((h, w))
    resizes the whole image to h x w, whatever the output's aspect."""
    pytest.importorskip("PIL")
    plain, _ = photos
    h, w = hw
    got = epoch(plain, size=hw, layout="NHWC", dct_scaling=False, scale=(1.0, 1.0),
                ratio=(0.01, 100.0), flip_prob=0.0)
    src = shard_sources(plain)
    compare(got, {k: tv_whole_image_crop(src[k], got[k], h, w) for k in got}, 2, 0.5)
