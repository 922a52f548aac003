"""Segmentation masks (issue 46): Loader(..., mask="seg.png") delivers batch.masks, (N, H, W)
uint8 or int32 on the host, numpy or torch as the labels, each sample's KEY.seg.png with its
image's crop, nearest resize and flip. Shards written here by Python's tarfile from PIL-encoded
JPEGs and masks (8-bit gray "L", palette "P" of 8 and 4 bits, 16-bit gray "I;16"); every mask
is compared with PIL: Image.open(mask).resize((W, H), NEAREST, box) then FLIP_LEFT_RIGHT when
flipped, with the box the batch reports for RANDOM crops (integral), and for CENTER with
torchvision's own path (the whole mask resized with NEAREST, then CenterCrop) on images whose
box is integral. Padding repeats carry their original's mask, skip mode's blanks are
mask_fill; bad masks fail naming the member or are counted under their reason; copies
outlive the batch."""
import io

import numpy as np
import pytest
from PIL import Image

import ringfeed
from conftest import ARRAY_TYPES, write_tar

H, W = 24, 40
N = 10
KW = dict(device="cpu", seed=7, size=(H, W), layout="NCHW", batch_size=4)
NARROW = ("L", "P", "P4")          # what uint8 masks take
WIDE = ("L", "P", "P4", "I;16")     # int32 adds 16-bit gray


def img_size(i):
    return 60 + 23 * i, 50 + 17 * i


def mask_array(i, kind, w, h):
    y, x = np.mgrid[0:h, 0:w]
    if kind == "L":
        return ((x * 3 + y * 5 + i * 11) % 256).astype(np.uint8)
    if kind == "P":
        return ((x + 2 * y + i) % 151).astype(np.uint8)
    if kind == "P4":
        return ((x // 2 + y + i) % 16).astype(np.uint8)
    return ((x * 257 + y * 1031 + i * 7919) % 65536).astype(np.uint16)


def mask_png(i, kind, w, h):
    im = Image.fromarray(mask_array(i, kind, w, h))
    opts = {}
    if kind in ("P", "P4"):  # colours unlike the indices: the indices must come out
        im.putpalette([v for c in range(256) for v in (255 - c, c * 7 % 256, 9)])
        if kind == "P4":
            opts["bits"] = 4
    buf = io.BytesIO()
    im.save(buf, "PNG", **opts)
    return buf.getvalue()


def write_shard(path, kinds, bad=None, size=img_size):
    """N samples KEY.jpg + KEY.cls + KEY.seg.png (mask kind kinds[i % len]); bad = (i, what)
    makes sample i's mask missing, bigger than its image, or 16-bit. Returns {key: (mask png
    bytes, kind)} and the members' offsets."""
    masks = {}
    members = []
    for i in range(N):
        w, h = size(i)
        rgb = np.random.default_rng(i).integers(0, 256, (h, w, 3), dtype=np.uint8)
        jpg = io.BytesIO()
        Image.fromarray(rgb).save(jpg, "JPEG", quality=90)
        kind = kinds[i % len(kinds)]
        what = bad[1] if bad and bad[0] == i else None
        kind = "I;16" if what == "wide" else kind
        png = mask_png(i, kind, w + (what == "bigger"), h)
        key = f"{i:08d}"
        masks[key] = (png, kind)
        members += [(key + ".jpg", jpg.getvalue()), (key + ".cls", str(i % 3).encode())]
        if what != "missing":
            members.append((key + ".seg.png", png))
    return masks, write_tar(path, members)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("masks")
    out = {}
    for name, kinds in (("narrow", NARROW), ("wide", WIDE)):
        path = str(d / f"{name}-000000.tar")
        out[name] = (path, write_shard(path, kinds)[0])
    return out


def center_mask(png, R, flip):
    """torchvision's segmentation path for CENTER: the mask resized whole (shorter side to R,
    the longer truncated) with NEAREST, then CenterCrop((H, W)), then flipped."""
    im = Image.open(io.BytesIO(png))
    w, h = im.size
    nw, nh = (R, int(R * h / w)) if w <= h else (int(R * w / h), R)
    left, top = round((nw - W) / 2), round((nh - H) / 2)
    r = im.resize((nw, nh), Image.NEAREST).crop((left, top, left + W, top + H))
    if flip:
        r = r.transpose(Image.FLIP_LEFT_RIGHT)
    return np.array(r).astype(np.int64)


def pil_mask(png, box, flip):
    r = Image.open(io.BytesIO(png)).resize((W, H), Image.NEAREST, box=box)
    if flip:
        r = r.transpose(Image.FLIP_LEFT_RIGHT)
    return np.array(r).astype(np.int64)


def npy(x):
    return x if isinstance(x, np.ndarray) else x.numpy()


def check_epoch(ld, masks, dtype, crop="random", R=None, fill=255):
    """Every sample's mask against PIL's (a blank's: all fill); returns (samples checked,
    padding repeats)."""
    seen = pad = 0
    for b in ld:
        m = npy(b.masks)
        assert m.shape == (b.count, H, W) and m.dtype == np.dtype(dtype)
        boxes, flips = npy(b.crop_boxes), npy(b.flips)
        for i, key in enumerate(b.keys):
            if int(b.sample_ids[i]) == 2**64 - 1:  # skip mode's blank padding
                assert (m[i] == fill).all()
                continue
            png, kind = masks[key]
            if crop == "random":
                x, y, bw, bh = (int(v) for v in boxes[i])
                box = (x, y, x + bw, y + bh)
                want = pil_mask(png, box, bool(flips[i]))
            else:
                box = R
                want = center_mask(png, R, bool(flips[i]))
            assert np.array_equal(m[i].astype(np.int64), want), \
                (key, kind, box, bool(flips[i]), np.argwhere(m[i] != want)[:3])
            seen += 1
            pad += bool(b.is_padding[i])
    return seen, pad


@pytest.mark.parametrize("array_type", ARRAY_TYPES)
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("which,dtype", [("narrow", "uint8"), ("wide", "int32")])
def test_random_crops_match_pil(shards, array_type, threads, which, dtype):
    path, masks = shards[which]
    with ringfeed.Loader(path, mask="seg.png", mask_dtype=dtype, array_type=array_type,
                         decode_threads=threads, **KW) as ld:
        assert check_epoch(ld, masks, dtype) == (N, 0)


@pytest.mark.parametrize("threads", [1, 3])
def test_letterbox_masks_are_the_whole_mask_resized_and_padded(shards, threads):
    # crop="letterbox": the whole mask resized with NEAREST onto the rectangle the image lands
    # on (batch.letterbox: scale and pad), flipped with the output, mask_fill around it, as
    # PIL pastes a resized mask onto a canvas of the fill.
    path, masks = shards["wide"]
    with ringfeed.Loader(path, mask="seg.png", mask_dtype="int32", mask_fill=7, crop="letterbox",
                         flip_prob=0.5, decode_threads=threads, **KW) as ld:
        seen = 0
        for b in ld:
            m, lb, flips = npy(b.masks), npy(b.letterbox), npy(b.flips)
            for i, key in enumerate(b.keys):
                png = masks[key][0]
                im = Image.open(io.BytesIO(png))
                sx, sy, px, py = (float(v) for v in lb[i])
                w, h = round(im.size[0] * sx), round(im.size[1] * sy)
                # a palette's indices as gray, so that the paste keeps them
                src = Image.fromarray(np.array(im)) if im.mode == "P" else im
                canvas = Image.new(src.mode, (W, H), 7)
                canvas.paste(src.resize((w, h), Image.NEAREST), (round(px), round(py)))
                want = np.array(canvas).astype(np.int64)
                if flips[i]:
                    want = want[:, ::-1]
                assert np.array_equal(m[i].astype(np.int64), want), (key, masks[key][1], lb[i])
                seen += 1
        assert seen == N


@pytest.mark.parametrize("threads", [1, 3])
def test_center_crops_match_torchvision(tmp_path, threads):
    # Images 96 high and of even widths resized to a shorter side of 48: a scale of exactly 2,
    # so the box is integral. (Elsewhere CENTER's box is fractional, and where an output
    # pixel's centre falls exactly on a source pixel's edge the float rounding of the box
    # and of torchvision's resize-then-crop may pick neighbours: test_masks.c checks those
    # against the box's own arithmetic.)
    path = str(tmp_path / "center-000000.tar")
    masks, _ = write_shard(path, WIDE, size=lambda i: (96 + 14 * i, 96))
    with ringfeed.Loader(path, mask="seg.png", mask_dtype="int32", crop="center",
                         resize_shorter=48, flip_prob=0.5, decode_threads=threads,
                         **KW) as ld:
        assert check_epoch(ld, masks, "int32", "center", 48) == (N, 0)


def test_padding_repeats_carry_their_originals_mask(shards):
    path, masks = shards["narrow"]
    pad = seen = 0
    for rank in range(3):  # 10 samples over 3 ranks: 2 repeats
        with ringfeed.Loader(path, mask="seg.png", rank=rank, world_size=3, decode_threads=3,
                             **KW) as ld:
            s, p = check_epoch(ld, masks, "uint8")
            seen, pad = seen + s, pad + p
    assert (seen, pad) == (12, 2)


@pytest.mark.parametrize("array_type", ARRAY_TYPES)
def test_copies_outlive_the_batch_and_off_is_none(shards, array_type):
    path, masks = shards["narrow"]
    with ringfeed.Loader(path, mask="seg.png", array_type=array_type, **KW) as ld:
        it = iter(ld)
        first = next(it)
        kept = npy(first.masks).copy()
        for _ in it:
            pass
        assert np.array_equal(npy(first.masks), kept)  # the slot was reused meanwhile
        if array_type == "torch":
            import torch
            assert isinstance(first.masks, torch.Tensor) and first.masks.dtype == torch.uint8
    with ringfeed.Loader(path, **KW) as ld:
        assert all(b.masks is None for b in ld)


@pytest.mark.parametrize("what,reason,code,words", [
    ("missing", "field", "RF_EFORMAT", "has no mask member 00000003.seg.png"),
    ("bigger", "mask", "RF_EFORMAT", "a mask must have its image's size"),
    ("wide", "mask", "RF_EFORMAT", "16-bit gray: its values need mask_dtype int32"),
])
def test_bad_masks_fail_by_name_or_are_counted(tmp_path, what, reason, code, words):
    path = str(tmp_path / "bad-000000.tar")
    masks, offsets = write_shard(path, NARROW, bad=(3, what))
    with pytest.raises(ringfeed.RingfeedError) as ei:
        for _ in ringfeed.Loader(path, mask="seg.png", shuffle=False, **KW):
            pass
    assert ei.value.code == getattr(ringfeed._capi, code)
    member = "00000003.jpg" if what == "missing" else "00000003.seg.png"
    at = f"{'sample 00000003' if what == 'missing' else 'member ' + member} at offset " \
         f"{offsets[member]}"
    assert path in str(ei.value) and at in str(ei.value) and words in str(ei.value)
    if what == "bigger":
        w, h = img_size(3)
        assert f"mask is {w + 1}x{h}" in str(ei.value) and f"{w}x{h}" in str(ei.value)
    with ringfeed.Loader(path, mask="seg.png", on_error="skip", decode_threads=3, mask_fill=7,
                         **KW) as ld:
        del masks["00000003"]
        seen, _ = check_epoch(ld, masks, "uint8", fill=7)
        es = ld.epoch_stats()
    assert seen == N - 1 and es["skipped_by_reason"][reason] == 1


def test_settings_are_checked(shards):
    path, _ = shards["narrow"]
    with pytest.raises(ValueError, match="mask_dtype"):
        ringfeed.Loader(path, mask="seg.png", mask_dtype="float32", **KW)
    with pytest.raises(ringfeed.RingfeedError, match="mask_fill 300"):
        ringfeed.Loader(path, mask="seg.png", mask_fill=300, **KW)
    with pytest.raises(ringfeed.RingfeedError, match="image_exts"):
        ringfeed.Loader(path, mask="png", **KW)


def test_bench_flags(shards):
    """ringfeed-bench takes the settings' flags (--mask, --mask-dtype, --mask-fill): a run
    with them decodes every mask; uint8 refuses the 16-bit one by name."""
    import subprocess
    from conftest import find_tool
    exe = find_tool("tools", "ringfeed-bench", "RINGFEED_BENCH")
    if exe is None:
        pytest.skip("ringfeed-bench not found (build it, or set RINGFEED_BENCH)")
    path, _ = shards["wide"]
    base = [exe, "--shards", path, "--device", "host", "--batch", "4", "--epochs", "1",
            "--mask", "seg.png"]
    p = subprocess.run(base + ["--mask-dtype", "int32", "--mask-fill", "7", "--show-config"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "mask seg.png" in p.stdout and "mask_dtype int32, mask_fill 7" in p.stdout
    p = subprocess.run(base, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and "16-bit gray: its values need mask_dtype int32" in p.stderr
