"""crop="letterbox", "center_pad" and "native" (issue 46) against PIL references written out
from their definitions: Ultralytics' LetterBox (r = min(h / H, w / W), new size round(W * r) x
round(H * r), left/top padding round(slack / 2 - 0.1)) and torchvision's Resize(shorter) +
CenterCrop (padding (crop - size) // 2 before the image, 0-filled), with PIL's antialiased
bilinear resize as the existing size tests use (python/tests/test_size.py). The padding must be
exact; inside, the two resizers' roundings may differ by 2 levels at most. batch.letterbox
must say where each image landed; flips mirror the whole output; 1 and 3 decode threads;
padding repeats included; the GPU paths (the host backend's emulation of the kernels and the
engines) deliver the CPU path's bytes for all three crops. crop="native": each image at its
own size (batch.sizes, batch.native_images()), its own pixels when it fits in H x W. Boxes
(box_json_path) land where batch.letterbox says, through the shared geometry. size_buckets:
batches of one bucket, (N, Hb, Wb, 3) or (N, 3, Hb, Wb), each sample its bucket's letterbox,
every sample once over two ranks; buckets given as pairs; bad entries named."""
import io
import os
import tarfile

import numpy as np
import pytest

import ringfeed

# (width, height): wide, tall, square, 1 x N, N x 1, smaller than the output, odd slack
SIZES = [(97, 61), (61, 97), (50, 50), (1, 37), (37, 1), (9, 5), (200, 7), (56, 40),
         (113, 80), (3, 90), (31, 44)]
H, W = 40, 56


def picture(w, h, seed):
    """Smooth gradients with a little texture: resizer roundings stay within a level or two."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 7 % 256], -1)
    img = img + rng.integers(0, 8, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def pad_shards(tmp_path_factory):
    """One tar of PNG samples KEY.png + KEY.cls (the label: the picture's index); returns
    (pattern, pictures)."""
    from PIL import Image
    d = tmp_path_factory.mktemp("letterbox")
    pics = [picture(w, h, i) for i, (w, h) in enumerate(SIZES)]
    path = os.path.join(str(d), "pad-0000.tar")
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as t:
        for i, img in enumerate(pics):
            buf = io.BytesIO()
            Image.fromarray(img).save(buf, format="PNG")
            for name, data in ((f"{i:06d}.png", buf.getvalue()), (f"{i:06d}.cls", b"%d" % i)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return path, pics


def letterbox_ref(img, pad, H=H, W=W):
    """Ultralytics' LetterBox of img to H x W with PIL's resize; (image, where the picture is,
    (r_x, r_y, left, top))."""
    from PIL import Image
    h, w = img.shape[:2]
    r = min(H / h, W / w)
    nw, nh = max(int(round(w * r)), 1), max(int(round(h * r)), 1)
    left, top = int(round((W - nw) / 2 - 0.1)), int(round((H - nh) / 2 - 0.1))
    out = np.empty((H, W, 3), np.uint8)
    out[:] = pad
    out[top:top + nh, left:left + nw] = np.asarray(
        Image.fromarray(img).resize((nw, nh), Image.BILINEAR))
    inside = np.zeros((H, W), bool)
    inside[top:top + nh, left:left + nw] = True
    return out, inside, (nw / w, nh / h, left, top)


def center_pad_ref(img, R, pad):
    """torchvision's Resize(R) then CenterCrop((H, W)) with its padding, with PIL's resize;
    (image, where the picture is, (scale_x, scale_y, pad_x, pad_y))."""
    from PIL import Image
    h, w = img.shape[:2]
    nw, nh = (R, int(R * h / w)) if w <= h else (int(R * w / h), R)
    nw, nh = max(nw, 1), max(nh, 1)
    resized = np.asarray(Image.fromarray(img).resize((nw, nh), Image.BILINEAR))
    pl, pt = max((W - nw) // 2, 0), max((H - nh) // 2, 0)  # center_crop's padding_ltrb
    padded = np.empty((max(nh, H), max(nw, W), 3), np.uint8)
    padded[:] = pad
    padded[pt:pt + nh, pl:pl + nw] = resized
    inside = np.zeros(padded.shape[:2], bool)
    inside[pt:pt + nh, pl:pl + nw] = True
    top = int(round((padded.shape[0] - H) / 2.0))
    left = int(round((padded.shape[1] - W) / 2.0))
    crop = np.s_[top:top + H, left:left + W]
    return padded[crop], inside[crop], (nw / w, nh / h, pl - left, pt - top)


def check_epoch(pattern, pics, crop, pad, threads, ref, **kw):
    """Every sample of an epoch on both ranks of two (a padding repeat on rank 1) against
    ref(picture) -> (image, mask of the picture, letterbox row); returns the number of flipped
    samples."""
    flipped = seen = 0
    for rank in (0, 1):
        with ringfeed.Loader(pattern, 4, size=(H, W), crop=crop, layout="NHWC", device="cpu",
                             array_type="numpy", decode_threads=threads, seed=3,
                             flip_prob=0.5, rank=rank, world_size=2, dct_scaling=False,
                             **kw) as ld:
            assert tuple(ld.config["pad_value"]) == pad
            for b in ld:
                assert b.letterbox.shape == (b.count, 4) and b.letterbox.dtype == np.float32
                for i in range(b.count):
                    want, inside, row = ref(pics[int(b.labels[i])])
                    if b.flips[i]:
                        want, inside = want[:, ::-1], inside[:, ::-1]
                    got = np.asarray(b.images[i])
                    d = np.abs(got.astype(int) - want.astype(int))
                    label = int(b.labels[i])
                    assert (d[~inside] == 0).all(), (crop, label, "padding")
                    assert d.max() <= 2 and d.mean() <= 0.5, (crop, label, d.max(), d.mean())
                    np.testing.assert_allclose(b.letterbox[i], row, rtol=1e-5, atol=1e-4)
                    flipped += int(b.flips[i])
                    seen += 1
    assert seen == len(pics) + 1
    return flipped


@pytest.mark.parametrize("threads", [1, 3])
def test_letterbox_is_ultralytics_letterbox(pad_shards, threads):
    pytest.importorskip("PIL")
    pattern, pics = pad_shards
    flips = check_epoch(pattern, pics, "letterbox", (114.0,) * 3, threads,
                        lambda p: letterbox_ref(p, 114))
    assert 0 < flips < len(pics) + 1
    flips = check_epoch(pattern, pics, "letterbox", (10.0, 200.0, 77.0), threads,
                        lambda p: letterbox_ref(p, (10, 200, 77)), pad_value=(10, 200, 77))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("R", [30, 64])
def test_center_pad_is_torchvision_center_crop(pad_shards, threads, R):
    pytest.importorskip("PIL")
    pattern, pics = pad_shards
    check_epoch(pattern, pics, "center_pad", (0.0,) * 3, threads,
                lambda p: center_pad_ref(p, R, 0), resize_shorter=R)


def test_one_pad_value_for_all_channels(pad_shards):
    pattern, _ = pad_shards
    with ringfeed.Loader(pattern, 4, size=(H, W), crop="letterbox", device="cpu",
                         array_type="numpy", pad_value=7) as ld:
        assert tuple(ld.config["pad_value"]) == (7.0, 7.0, 7.0)
    with pytest.raises(ValueError, match="pad_value"):
        ringfeed.Loader(pattern, 4, crop="letterbox", device="cpu", pad_value=256)


@pytest.fixture(scope="module")
def jpeg_shards(tmp_path_factory):
    """The pictures as JPEGs (4:2:0, PIL's encoder): what the GPU paths take."""
    from PIL import Image
    d = tmp_path_factory.mktemp("letterbox-jpeg")
    path = os.path.join(str(d), "pad-0000.tar")
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as t:
        for i, (w, h) in enumerate(SIZES):
            buf = io.BytesIO()
            Image.fromarray(picture(w, h, i)).save(buf, format="JPEG", quality=90)
            for name, data in ((f"{i:06d}.jpg", buf.getvalue()), (f"{i:06d}.cls", b"%d" % i)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return path


def epoch_images(pattern, crop, layout, **kw):
    """{label: (image bytes, letterbox row, flip)} of one epoch, and the loader's stats."""
    out = {}
    with ringfeed.Loader(pattern, 4, size=(H, W), crop=crop, layout=layout, device="cpu",
                         array_type="numpy", seed=11, flip_prob=0.5, dct_scaling=False,
                         pad_value=(10, 200, 77), resize_shorter=30, **kw) as ld:
        for b in ld:
            imgs = b.native_images() if crop == "native" else b.images
            for i, img in enumerate(imgs):
                out[int(b.labels[i])] = (np.asarray(img).copy(), b.letterbox[i].copy(),
                                         int(b.flips[i]))
        return out, ld.stats()


@pytest.mark.parametrize("crop", ["letterbox", "center_pad", "native"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("path", ["gpu_decode", "hw_decode_percent"])
def test_gpu_paths_pad_and_pack_as_the_cpu(jpeg_shards, crop, layout, path):
    """The kernels (gpu_decode) and the engines (hw_decode_percent=100) resize onto the crop's
    rectangle and pad the rest, or pack native sizes, byte for byte as the CPU does at full
    scale; the letterbox rows and flips are the same."""
    pytest.importorskip("PIL")
    want, _ = epoch_images(jpeg_shards, crop, layout)
    got, st = epoch_images(jpeg_shards, crop, layout,
                           **({"gpu_decode": True} if path == "gpu_decode"
                              else {"hw_decode_percent": 100}))
    assert st["gpu_decoded" if path == "gpu_decode" else "hw_decoded"] > 0
    assert sorted(got) == sorted(want) == list(range(len(SIZES)))
    for k, (img, row, flip) in got.items():
        assert flip == want[k][2] and img.shape == want[k][0].shape, (k, crop)
        np.testing.assert_array_equal(img, want[k][0], err_msg=f"{crop} picture {k}")
        np.testing.assert_array_equal(row, want[k][1])


def test_float_output_normalizes_the_padding(pad_shards):
    """The padding is written as decoded pixels are, then converted with them: (pad - mean) /
    std in a float batch, the image inside as the uint8 batch's converted."""
    pattern, _ = pad_shards
    mean, std = (100.0, 110.0, 120.0), (2.0, 4.0, 8.0)
    kw = dict(size=(H, W), crop="letterbox", layout="NHWC", device="cpu", array_type="numpy",
              shuffle=False, flip_prob=0.0, copy=True, pad_value=(10, 200, 77))
    with ringfeed.Loader(pattern, 4, **kw) as ld:
        plain = [np.asarray(img) for b in ld for img in b.images]
    with ringfeed.Loader(pattern, 4, dtype="float32", mean=mean, std=std, **kw) as ld:
        floats = [np.asarray(img) for b in ld for img in b.images]
    assert len(plain) == len(floats) == len(SIZES)
    for u8, f32 in zip(plain, floats):
        np.testing.assert_allclose(f32, (u8.astype(np.float32) - mean) / std, rtol=1e-6)
    corner = floats[3][0, 0]  # a 1 x 37 picture: its left columns are padding
    np.testing.assert_allclose(corner, (np.array([10, 200, 77]) - mean) / std, rtol=1e-6)


def native_ref(img):
    """crop="native" to at most H x W: the picture itself when it fits, else PIL's resize to
    its letterbox rectangle; (image, exact)."""
    from PIL import Image
    h, w = img.shape[:2]
    if h <= H and w <= W:
        return img, True
    r = min(H / h, W / w)
    nw, nh = max(int(round(w * r)), 1), max(int(round(h * r)), 1)
    return np.asarray(Image.fromarray(img).resize((nw, nh), Image.BILINEAR)), False


@pytest.mark.parametrize("threads, layout", [(1, "NHWC"), (3, "NCHW")])
def test_native_is_each_image_at_its_own_size(pad_shards, threads, layout):
    pytest.importorskip("PIL")
    pattern, pics = pad_shards
    seen = 0
    for rank in (0, 1):
        with ringfeed.Loader(pattern, 4, size=(H, W), crop="native", layout=layout,
                             device="cpu", array_type="numpy", decode_threads=threads,
                             flip_prob=0.5, seed=5, rank=rank, world_size=2) as ld:
            for b in ld:
                assert b.sizes.shape == (b.count, 2) and b.sizes.dtype == np.int32
                for i, got in enumerate(b.native_images()):
                    want, exact = native_ref(pics[int(b.labels[i])])
                    if b.flips[i]:
                        want = want[:, ::-1]
                    if layout == "NCHW":
                        want = want.transpose(2, 0, 1)
                    assert got.shape == want.shape
                    hw = want.shape[1:] if layout == "NCHW" else want.shape[:2]
                    assert tuple(b.sizes[i]) == hw
                    d = np.abs(got.astype(int) - want.astype(int))
                    assert (d.max() == 0) if exact else (d.max() <= 2 and d.mean() <= 0.5)
                    seen += 1
    assert seen == len(pics) + 1


def test_native_float_output_and_the_other_crops(pad_shards):
    pattern, _ = pad_shards
    mean, std = (100.0, 110.0, 120.0), (2.0, 4.0, 8.0)
    kw = dict(size=(H, W), crop="native", layout="NHWC", device="cpu", array_type="numpy",
              shuffle=False, copy=True)
    with ringfeed.Loader(pattern, 4, **kw) as ld:
        plain = [img.copy() for b in ld for img in b.native_images()]
    with ringfeed.Loader(pattern, 4, dtype="float32", mean=mean, std=std, **kw) as ld:
        floats = [img.copy() for b in ld for img in b.native_images()]
    for u8, f32 in zip(plain, floats):
        np.testing.assert_allclose(f32, (u8.astype(np.float32) - mean) / std, rtol=1e-6)
    with ringfeed.Loader(pattern, 4, size=(H, W), crop="letterbox", device="cpu",
                         array_type="numpy") as ld:
        b = next(iter(ld))
        assert b.sizes is None
        with pytest.raises(ValueError, match="native"):
            b.native_images()
    with pytest.raises(ringfeed.RingfeedError, match="needs layout NHWC"):
        ringfeed.Loader(pattern, 4, crop="native", layout="NCHW", dtype="float32",
                        device="cpu")


@pytest.mark.parametrize("crop", ["letterbox", "native"])
def test_boxes_follow_the_letterbox(tmp_path, crop):
    """Boxes (box_json_path) map through the shared geometry: for a letterbox, x * scale_x +
    pad_x of batch.letterbox, mirrored in the whole output when flipped; for native, the same
    in the image's own size. The whole image is visible, so nothing is clipped."""
    from PIL import Image
    import json
    pics = [picture(w, h, i) for i, (w, h) in enumerate(SIZES)]
    path = str(tmp_path / "boxes-0000.tar")
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as t:
        for i, img in enumerate(pics):
            h, w = img.shape[:2]
            boxes = [[0, 0, w, h], [w * 0.25, h * 0.5, w * 0.75, h]]
            buf = io.BytesIO()
            Image.fromarray(img).save(buf, format="PNG")
            for name, data in ((f"{i:06d}.png", buf.getvalue()), (f"{i:06d}.cls", b"%d" % i),
                               (f"{i:06d}.json", json.dumps({"b": boxes}).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    seen = 0
    with ringfeed.Loader(path, 4, size=(H, W), crop=crop, device="cpu", array_type="numpy",
                         flip_prob=0.5, seed=2, box_json_path="b", max_boxes=2) as ld:
        for b in ld:
            for i in range(b.count):
                h, w = pics[int(b.labels[i])].shape[:2]
                sx, sy, px, py = (float(v) for v in b.letterbox[i])
                width = W if crop == "letterbox" else int(b.sizes[i][1])
                want = []
                for x1, y1, x2, y2 in ([0, 0, w, h], [w * 0.25, h * 0.5, w * 0.75, h]):
                    x1, x2 = x1 * sx + px, x2 * sx + px
                    if b.flips[i]:
                        x1, x2 = width - x2, width - x1
                    want.append([x1, y1 * sy + py, x2, y2 * sy + py])
                assert int(b.box_counts[i]) == 2
                np.testing.assert_allclose(b.boxes[i], want, atol=1e-3)
                seen += 1
    assert seen == len(pics)


BUCKETS = [(24, 40), (32, 32), (40, 24)]  # (height, width)


def nearest_bucket(w, h):
    """The bucket of a w x h picture by its definition: the nearest aspect ratio in log
    distance, the first listed on a tie."""
    d = [abs(np.log(w / h) - np.log(bw / bh)) for bh, bw in BUCKETS]
    return min(range(len(BUCKETS)), key=lambda k: (d[k], k))


@pytest.mark.parametrize("threads, layout", [(1, "NHWC"), (3, "NCHW")])
def test_size_buckets_batches_of_one_bucket(pad_shards, threads, layout):
    pytest.importorskip("PIL")
    pattern, pics = pad_shards
    seen = [0] * len(pics)
    for rank in (0, 1):
        with ringfeed.Loader(pattern, 2, crop="letterbox", size_buckets=BUCKETS,
                             layout=layout, device="cpu", array_type="numpy",
                             decode_threads=threads, flip_prob=0.5, seed=11, rank=rank,
                             world_size=2, dct_scaling=False) as ld:
            assert ld.config["size_buckets"] == "24x40,32x32,40x24"
            assert (ld.config["image_height"], ld.config["image_width"]) == (40, 40)
            for b in ld:
                k, hb, wb = b.bucket
                assert (hb, wb) == BUCKETS[k]
                shape = (b.count, 3, hb, wb) if layout == "NCHW" else (b.count, hb, wb, 3)
                assert b.images.shape == shape
                assert b.sizes.tolist() == [[hb, wb]] * b.count
                for i in range(b.count):
                    pic = pics[int(b.labels[i])]
                    assert nearest_bucket(pic.shape[1], pic.shape[0]) == k
                    want, inside, row = letterbox_ref(pic, 114, hb, wb)
                    if b.flips[i]:
                        want, inside = want[:, ::-1], inside[:, ::-1]
                    got = np.asarray(b.images[i])
                    if layout == "NCHW":
                        got = got.transpose(1, 2, 0)
                    d = np.abs(got.astype(int) - want.astype(int))
                    assert (d[~inside] == 0).all(), (int(b.labels[i]), "padding")
                    assert d.max() <= 2 and d.mean() <= 0.5
                    np.testing.assert_allclose(b.letterbox[i], row, rtol=1e-5, atol=1e-4)
                    seen[int(b.labels[i])] += not b.is_padding[i]
    assert seen == [1] * len(pics)


def test_size_buckets_torch(pad_shards):
    pattern, pics = pad_shards
    torch = pytest.importorskip("torch")
    with ringfeed.Loader(pattern, 3, crop="letterbox", size_buckets="24x40, 40x24",
                         layout="NHWC", device="cpu", array_type="torch") as ld:
        n = 0
        for b in ld:
            assert isinstance(b.images, torch.Tensor)
            assert tuple(b.images.shape) == (b.count,) + BUCKETS[2 * b.bucket[0]] + (3,)
            assert b.images.contiguous().shape == b.images.shape
            n += b.count
        assert n == len(pics)


def test_size_buckets_errors(pad_shards):
    pattern, _ = pad_shards
    for bad, why in (("24x40,24x", 'entry 2 "24x"'), ("24x40,24x40", "repeats entry 1"),
                     ("0x3", "1..8192")):
        with pytest.raises(ringfeed.RingfeedError, match=why):
            ringfeed.Loader(pattern, 3, crop="letterbox", size_buckets=bad, device="cpu")
    with pytest.raises(ringfeed.RingfeedError, match="set crop letterbox"):
        ringfeed.Loader(pattern, 3, size_buckets="24x40", device="cpu")
    with pytest.raises(ringfeed.RingfeedError, match="does not fit"):
        ringfeed.Loader(pattern, 3, size=(32, 32), crop="letterbox", size_buckets="24x40",
                        device="cpu")
    with pytest.raises(ValueError, match="size_buckets"):
        ringfeed.Loader(pattern, 3, crop="letterbox", size_buckets=[(24, 40, 3)], device="cpu")


def test_size_buckets_resume_and_len(pad_shards):
    """len(loader) counts the bucket batches of an epoch (full ones, then one smaller batch
    per bucket with leftovers); a state_dict saved mid-epoch resumes with the batches that
    were left; one of another world_size is refused."""
    pattern, pics = pad_shards
    kw = dict(crop="letterbox", size_buckets=BUCKETS, device="cpu", array_type="numpy",
              decode_threads=2, seed=17)
    counts = [0] * len(BUCKETS)
    for p in pics:
        counts[nearest_bucket(p.shape[1], p.shape[0])] += 1
    with ringfeed.Loader(pattern, 2, **kw) as ld:
        full = [(b.bucket[0], b.labels.tolist()) for b in ld]
        assert len(ld) == len(full) == sum(c // 2 + c % 2 for c in counts)
    with ringfeed.Loader(pattern, 2, **kw) as ld:
        it = iter(ld)
        head = [(b.bucket[0], b.labels.tolist()) for b in (next(it), next(it), next(it))]
        sd = ld.state_dict()
    with ringfeed.Loader(pattern, 2, **kw) as ld:
        ld.load_state_dict(sd)
        tail = [(b.bucket[0], b.labels.tolist()) for b in ld]
    assert head + tail == full
    with pytest.raises(ringfeed.RingfeedError, match="size_buckets"):
        with ringfeed.Loader(pattern, 2, world_size=2, rank=0, **kw) as ld:
            ld.load_state_dict(sd)
