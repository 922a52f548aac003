"""multi_crop= (issue 46 item 5): K views per sample, decoded once. batch.views is a list of
per-view arrays (numpy or torch, (N, H_k, W_k, 3) or (N, 3, H_k, W_k), zero-copy slices of
batch.images), batch.view_boxes and batch.view_flips their boxes and flips; each view is its
reported box cut from the source with PIL, resized (antialiased bilinear) and flipped when
reported, within test_size.py's PIL bounds (at full scale; DCT-scaled views are the library's
own single-view decodes, tests/test_multicrop.c); the same seed gives the same views at any
thread count, a resumed loader the uninterrupted one's; float outputs are each view
normalized; the GPU paths (host emulation) cut the CPU's views; bad text is a ValueError naming
multi_crop. With mask=, boxes and keypoints each
view has its own (batch.view_masks, batch.view_targets(k)): the view's mask is PIL's NEAREST
over the view's box, flipped with it, its boxes and points the member's mapped through that box
and flip (clipped, kept by box_min_visibility, flip pairs swapped), at 1 and 3 threads and the
same after a resume; a bad mask or box is named or counted as without views; ringfeed-bench
takes --multi-crop with --mask and the box flags."""

import numpy as np
import pytest

import ringfeed
from conftest import ARRAY_TYPES, map_boxes, map_points, shard_sources

VIEWS = "2x32x40:0.4-1,3x16:0.1-0.4"
SHAPES = [(32, 40), (32, 40), (16, 16), (16, 16), (16, 16)]
KW = dict(device="cpu", decode_threads=2, seed=11, multi_crop=VIEWS)


def npy(x):
    return x if isinstance(x, np.ndarray) else x.numpy()




def epoch_views(pattern, **kw):
    """{key: [(view as NHWC uint8, box, flip) per view]} of one epoch, padding left out."""
    out = {}
    with ringfeed.Loader(pattern, 8, layout="NHWC", array_type="numpy", copy=True,
                         **dict(KW, **kw)) as ld:
        for b in ld:
            for i, (k, pad) in enumerate(zip(b.keys, b.is_padding)):
                if not pad:
                    out[k] = [(np.array(v[i]), tuple(int(x) for x in bx[i]), bool(fl[i]))
                              for v, bx, fl in zip(b.views, b.view_boxes, b.view_flips)]
    return out


@pytest.mark.parametrize("array_type", ARRAY_TYPES)
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_views_shapes_and_types(shards, array_type, layout):
    with ringfeed.Loader(shards, 8, array_type=array_type, layout=layout, **KW) as ld:
        b = next(iter(ld))
        assert len(b.views) == len(SHAPES) == len(b.view_boxes) == len(b.view_flips)
        assert b.view_masks == [] and b.masks is None  # no mask=
        row = sum(3 * h * w for h, w in SHAPES)
        assert tuple(b.images.shape) == (8, row)
        for v, (h, w), bx, fl in zip(b.views, SHAPES, b.view_boxes, b.view_flips):
            want = (8, h, w, 3) if layout == "NHWC" else (8, 3, h, w)
            assert tuple(v.shape) == want
            assert tuple(bx.shape) == (8, 4) and tuple(fl.shape) == (8,)
            if array_type == "torch":
                import torch
                assert isinstance(v, torch.Tensor) and v.dtype == torch.uint8
                assert isinstance(bx, torch.Tensor) and fl.dtype == torch.bool
            else:
                assert v.dtype == np.uint8 and bx.dtype == np.int32 and fl.dtype == np.bool_
        # zero-copy: view 0 is the start of each sample's row
        assert np.array_equal(npy(b.views[0]).reshape(8, -1),
                              npy(b.images)[:, :3 * SHAPES[0][0] * SHAPES[0][1]])
        assert np.array_equal(npy(b.crop_boxes), npy(b.view_boxes[0]))
        # each view's letterbox rows: its box's scale onto the view and the offset mapping
        # the box's corner to the output's (RandomResizedCrop: the whole view)
        assert len(b.view_letterbox) == len(SHAPES)
        assert np.array_equal(npy(b.letterbox), npy(b.view_letterbox[0]))
        for (h, w), bx, pl in zip(SHAPES, b.view_boxes, b.view_letterbox):
            bx, pl = npy(bx).astype(np.float64), npy(pl)
            assert pl.dtype == np.float32 and pl.shape == (8, 4)
            np.testing.assert_allclose(pl[:, 0], w / bx[:, 2], rtol=1e-6)
            np.testing.assert_allclose(pl[:, 1], h / bx[:, 3], rtol=1e-6)
            np.testing.assert_allclose(pl[:, 2], -bx[:, 0] * w / bx[:, 2], rtol=1e-5, atol=1e-3)
            np.testing.assert_allclose(pl[:, 3], -bx[:, 1] * h / bx[:, 3], rtol=1e-5, atol=1e-3)


def pil_view(img, box, flip, size):
    from PIL import Image
    x, y, w, h = box
    out = img.crop((x, y, x + w, y + h)).resize((size[1], size[0]), Image.BILINEAR)
    if flip:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(out)


def test_each_view_is_its_box_with_pil(shards):
    """test_size.py's PIL bounds (at most 2 levels, a mean of 0.5 per view), at full scale."""
    pytest.importorskip("PIL")
    got = epoch_views(shards, dct_scaling=False, flip_prob=0.5)
    src = shard_sources(shards)
    assert got and got.keys() <= src.keys()
    worst_max = worst_mean = 0.0
    flips = distinct = 0
    for k, views in got.items():
        Wi, Hi = src[k].size
        for (view, box, flip), size in zip(views, SHAPES):
            x, y, w, h = box
            assert 0 <= x and 0 <= y and 0 < w and 0 < h and x + w <= Wi and y + h <= Hi
            d = np.abs(view.astype(np.int16) - pil_view(src[k], box, flip, size).astype(np.int16))
            worst_max, worst_mean = max(worst_max, d.max()), max(worst_mean, d.mean())
            flips += flip
        distinct += views[0][1] != views[1][1]
        # the global views' boxes at scale 0.4-1, the local ones' at 0.1-0.4 of the image
        for (_, (_, _, w, h), _), lo, hi in zip(views, [.4, .4, .1, .1, .1], [1, 1, .4, .4, .4]):
            assert lo * 0.9 <= w * h / (Wi * Hi) <= hi * 1.1 or w * h == Wi * Hi
    assert worst_max <= 2 and worst_mean <= 0.5, (worst_max, worst_mean)
    assert 0 < flips < len(got) * len(SHAPES)
    assert distinct == len(got)


def test_same_seed_same_views_and_threads_change_nothing(shards):
    a = epoch_views(shards, decode_threads=1)
    b = epoch_views(shards, decode_threads=3)
    c = epoch_views(shards, seed=12)
    assert a.keys() == b.keys() == c.keys()
    for k in a:
        assert all(np.array_equal(x[0], y[0]) and x[1:] == y[1:] for x, y in zip(a[k], b[k]))
        assert any(x[1:] != y[1:] for x, y in zip(a[k], c[k]))


def test_resume_gives_the_same_views(shards):
    """Two batches, the state, a new loader from it: the epoch's other samples, each once,
    with the uninterrupted run's views."""
    ref = epoch_views(shards)
    got = {}

    def take(b):
        for i, k in enumerate(b.keys):
            if not b.is_padding[i]:
                assert k not in got, f"{k} delivered twice"
                got[k] = [np.array(v[i]) for v in b.views]

    with ringfeed.Loader(shards, 8, array_type="numpy", copy=True, layout="NHWC", **KW) as ld:
        it = iter(ld)
        for _ in range(2):
            take(next(it))
        state = ld.state_dict()
    assert state["batches_in_epoch"] == 2
    with ringfeed.Loader(shards, 8, array_type="numpy", copy=True, layout="NHWC", **KW) as ld:
        ld.load_state_dict(state)
        for b in ld:
            if b.epoch != state["epoch"]:
                break
            take(b)
    assert got.keys() == ref.keys()
    for k in ref:
        assert all(np.array_equal(g, r[0]) for g, r in zip(got[k], ref[k]))


def test_float_views_are_normalized_views(shards):
    u8 = epoch_views(shards)
    mean, std = ringfeed.IMAGENET_MEAN, ringfeed.IMAGENET_STD
    with ringfeed.Loader(shards, 8, array_type="numpy", layout="NCHW", dtype="float32",
                         mean=mean, std=std, **KW) as ld:
        for b in ld:
            for i, k in enumerate(b.keys):
                if b.is_padding[i]:
                    continue
                for v, (ref, _, _) in zip(b.views, u8[k]):
                    want = (ref.astype(np.float32) - np.float32(mean)) / np.float32(std)
                    np.testing.assert_allclose(v[i], want.transpose(2, 0, 1), atol=1e-4)


@pytest.mark.parametrize("text, says", [
    ("2x", "group 1"), ("2x224,x96", "group 2"), ("0x224", "0 views"),
    ("2x224:0.5-0.4", "scale range"), ("2x224;6x96", "not COUNTxSIZE")])
def test_bad_text_is_refused(shards, text, says):
    with pytest.raises((ValueError, ringfeed.RingfeedError)) as e:
        ringfeed.Loader(shards, 8, device="cpu", multi_crop=text)
    assert "multi_crop" in str(e.value) and says in str(e.value)


@pytest.mark.parametrize("path", [{"gpu_decode": True}, {"hw_decode_percent": 100}])
def test_gpu_paths_cut_the_cpu_views(shards, path):
    """The kernels and the engines (the host backend's emulation) deliver each sample's views
    as one packet, byte for byte the CPU's full-scale views, with the same boxes and flips."""
    want = epoch_views(shards, dct_scaling=False)
    got = epoch_views(shards, **path)
    assert sorted(got) == sorted(want) and want
    for k in want:
        for (a, abox, aflip), (b, bbox, bflip) in zip(got[k], want[k]):
            assert abox == bbox and aflip == bflip
            np.testing.assert_array_equal(a, b, err_msg=f"{k} {path}")


def test_no_views_without_the_setting(shards):
    with ringfeed.Loader(shards, 8, device="cpu", array_type="numpy") as ld:
        b = next(iter(ld))
        assert b.views == [] and b.view_boxes == [] and b.view_flips == [] == b.view_masks
        assert b.view_letterbox == []
        assert b.images.ndim == 4


def _cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or ringfeed._capi.cuda_device_count() == 0:
        pytest.skip("no CUDA device, or libringfeed built without CUDA")
    return torch


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_cuda_views_are_the_hosts(shards, layout):
    """On the CUDA backend (whose AUTO schedule then decodes on the CPU): the views, on the
    device, equal the host backend's; each a (N, ...) tensor slicing one copied row."""
    torch = _cuda()
    ref = epoch_views(shards)
    n = 0
    with ringfeed.Loader(shards, 8, device="cuda", layout=layout, **KW) as ld:
        for b in ld:
            assert len(b.views) == len(SHAPES)
            for i, k in enumerate(b.keys):
                if b.is_padding[i]:
                    continue
                for v, (want, box, flip), bx, fl in zip(b.views, ref[k], b.view_boxes,
                                                         b.view_flips):
                    assert v.is_cuda and v.dtype == torch.uint8
                    got = v[i].cpu().numpy()
                    got = got if layout == "NHWC" else got.transpose(1, 2, 0)
                    assert np.array_equal(got, want), k
                    assert tuple(int(x) for x in bx[i]) == box and bool(fl[i]) == flip
                n += 1
    assert n == len(ref)


def test_cuda_float_views_are_refused(shards):
    _cuda()
    with pytest.raises((ValueError, ringfeed.RingfeedError)) as e:
        ringfeed.Loader(shards, 8, device="cuda", dtype="float32", **KW)
    assert "multi_crop" in str(e.value) and "uint8" in str(e.value)


def test_groups_as_tuples(shards):
    """multi_crop as [(count, size, (scale_min, scale_max)), ...] is the same text."""
    text = epoch_views(shards)
    groups = epoch_views(shards, multi_crop=[(2, (32, 40), (0.4, 1)), (3, 16, (0.1, 0.4))])
    assert text.keys() == groups.keys()
    for k in text:
        assert all(np.array_equal(a[0], b[0]) and a[1:] == b[1:]
                   for a, b in zip(text[k], groups[k]))
    with ringfeed.Loader(shards, 8, device="cpu", multi_crop=[(2, 24)]) as ld:
        assert ld.config["multi_crop"] == "2x24x24"
        assert [tuple(v.shape[1:]) for v in next(iter(ld)).views] == [(3, 24, 24)] * 2
    with pytest.raises(ValueError, match="multi_crop"):
        ringfeed.Loader(shards, 8, device="cpu", multi_crop=[(2,)])


# ---- masks, boxes and keypoints per view -----------------------------------------------------

TN = 10


def _targets_shard(path, bad=None):
    """TN samples KEY.jpg + KEY.cls + KEY.seg.png (8-bit gray of a formula) + KEY.json with
    three boxes (xyxy pixels), their classes and three points; bad = (i, "mask" | "box")
    makes sample i's mask one column wider than its image or its box 1 leave the image.
    Returns {key: (mask png, boxes (3, 4), classes (3,), points (3, 3))}."""
    import io
    import json
    from PIL import Image
    from conftest import write_tar
    out, members = {}, []
    for i in range(TN):
        w, h = 70 + 19 * i, 60 + 13 * i
        rgb = np.random.default_rng(i).integers(0, 256, (h, w, 3), dtype=np.uint8)
        jpg, png = io.BytesIO(), io.BytesIO()
        Image.fromarray(rgb).save(jpg, "JPEG", quality=90)
        mw = w + (bad == (i, "mask"))
        y, x = np.mgrid[0:h, 0:mw]
        Image.fromarray(((x * 3 + y * 5 + i * 11) % 256).astype(np.uint8)).save(png, "PNG")
        boxes = np.array([[.1 * w, .2 * h, .6 * w, .7 * h], [.5 * w, .1 * h, .95 * w, .4 * h],
                          [.3 * w, .5 * h, .36 * w, .56 * h]]).round(2)
        if bad == (i, "box"):
            boxes[1, 2] = w + 5
        pts = np.array([[.2 * w, .3 * h, 2], [.8 * w, .35 * h, 2], [.5 * w, .9 * h, 1]]).round(2)
        cls = [i % 4, 7, 2]
        doc = {"boxes": boxes.tolist(), "cls": cls, "kp": pts.tolist()}
        key = f"{i:08d}"
        out[key] = (png.getvalue(), boxes, np.array(cls), pts)
        members += [(key + ".jpg", jpg.getvalue()), (key + ".cls", str(i % 3).encode()),
                    (key + ".seg.png", png.getvalue()), (key + ".json", json.dumps(doc).encode())]
    write_tar(path, members)
    return out


TKW = dict(KW, mask="seg.png", box_json_path="boxes", box_class_json_path="cls", max_boxes=3,
           box_min_visibility=0.25, keypoint_json_path="kp", max_points=3,
           keypoint_flip_pairs="0:1", flip_prob=0.5)


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("mc_targets") / "t-000000.tar")
    return path, _targets_shard(path)


def _nearest(at, size, n, extent):
    """The source pixels a NEAREST resize of [at, at + size) onto n pixels samples: PIL's own
    (an image of indexes resized with the box), the pixel under each output pixel's centre as
    PIL's running sum of the scale reaches it, ties on a pixel's edge included."""
    from PIL import Image
    idx = Image.fromarray(np.arange(extent, dtype=np.int32)[None, :].repeat(2, 0))
    return np.array(idx.resize((n, 1), Image.NEAREST, box=(at, 0, at + size, 1)))[0]


def _view_reference(src, box, flip, size):
    """A view's mask (PIL's NEAREST over the box, flipped: test_masks.py's reference, at the
    view's size), boxes kept and points (conftest's, as
    test_boxes.py's for one crop)."""
    import io
    from PIL import Image
    png, boxes, cls, pts = src
    (h, w), (x, y, bw, bh) = size, (int(v) for v in box)
    full = np.array(Image.open(io.BytesIO(png)))
    m = full[_nearest(y, bh, h, full.shape[0])][:, _nearest(x, bw, w, full.shape[1])]
    m = m[:, ::-1] if flip else m
    kept, idx = map_boxes(boxes, box, flip, size, 0.25)
    p = map_points(pts, box, flip, size)
    if flip:  # keypoint_flip_pairs 0:1
        p = p[[1, 0, 2]]
    return m, kept, cls[idx], p


def _epoch_targets(path, src, resume_after=None, **kw):
    """{key: [(mask, boxes, classes, points) per view]} of one epoch, each view checked
    against its reference; resume_after: stop after that many batches and go on from the
    state in a new loader."""
    got = {}

    def take(b, src):
        n = b.count
        assert len(b.view_masks) == len(SHAPES)
        assert np.array_equal(npy(b.masks), npy(b.view_masks[0]))
        for k, (m, (h, w)) in enumerate(zip(b.view_masks, SHAPES)):
            assert tuple(m.shape) == (n, h, w) and npy(m).dtype == np.uint8
        for i, key in enumerate(b.keys):
            if b.is_padding[i]:
                continue
            assert key not in got, f"{key} delivered twice"
            got[key] = []
            for k in range(len(SHAPES)):
                t = b.view_targets(k)[i]
                row = (npy(b.view_masks[k][i]).copy(), npy(t["boxes"]).copy(),
                       npy(t["labels"]).copy(), npy(t["keypoints"]).copy())
                box, flip = npy(b.view_boxes[k][i]), bool(b.view_flips[k][i])
                want = _view_reference(src[key], box, flip, SHAPES[k])
                assert np.array_equal(row[0], want[0]), (key, k, box, flip)
                np.testing.assert_allclose(row[1], want[1], atol=1e-3, err_msg=f"{key} {k}")
                assert np.array_equal(row[2], want[2]), (key, k)
                np.testing.assert_allclose(row[3], want[3], atol=1e-3, err_msg=f"{key} {k}")
                got[key].append(row)

    opts = dict(TKW, array_type="numpy", copy=True, **kw)
    with ringfeed.Loader(path, 4, **opts) as ld:
        it = iter(ld)
        for j, b in enumerate(it):
            take(b, src)
            if resume_after is not None and j + 1 == resume_after:
                state = ld.state_dict()
                break
        else:
            return got
    with ringfeed.Loader(path, 4, **opts) as ld:
        ld.load_state_dict(state)
        for b in ld:
            if b.epoch != state["epoch"]:
                break
            take(b, src)
    return got


@pytest.mark.parametrize("threads", [1, 3])
def test_view_masks_and_targets_follow_each_view(targets, threads):
    """Every view's mask is PIL's NEAREST over the view's box (flipped with it), its boxes
    and points the member's through that box; the same at 1 and 3 threads and after a
    resume."""
    pytest.importorskip("PIL")
    path, src = targets
    got = _epoch_targets(path, src, decode_threads=threads)
    assert len(got) == TN
    again = _epoch_targets(path, src, resume_after=1, decode_threads=3)
    assert got.keys() == again.keys()
    for key in got:
        for a, b in zip(got[key], again[key]):
            assert all(np.array_equal(x, y) for x, y in zip(a, b)), key


@pytest.mark.parametrize("threads", [1, 3])
def test_letterbox_view_masks_are_padded(targets, threads):
    """crop="letterbox" views: each view's mask is the whole mask resized (NEAREST) onto the
    rectangle Ultralytics' letterbox gives at that view's size, mask_fill around it, flipped
    with the view."""
    import io
    from PIL import Image
    path, src = targets
    seen = 0
    with ringfeed.Loader(path, 4, **dict(TKW, crop="letterbox", mask_fill=7,
                                         decode_threads=threads, array_type="numpy")) as ld:
        for b in ld:
            for i, key in enumerate(b.keys):
                full = np.array(Image.open(io.BytesIO(src[key][0])))
                h, w = full.shape
                for k, (H, W) in enumerate(SHAPES):
                    assert tuple(int(v) for v in b.view_boxes[k][i]) == (0, 0, w, h)
                    r = min(H / h, W / w)
                    nw, nh = round(w * r), round(h * r)
                    left, top = round((W - nw) / 2 - 0.1), round((H - nh) / 2 - 0.1)
                    want = np.full((H, W), 7, np.uint8)
                    want[top:top + nh, left:left + nw] = \
                        full[_nearest(0, h, nh, h)][:, _nearest(0, w, nw, w)]
                    want = want[:, ::-1] if b.view_flips[k][i] else want
                    assert np.array_equal(b.view_masks[k][i], want), (key, k)
                seen += 1
    assert seen == TN


@pytest.mark.parametrize("array_type", ARRAY_TYPES)
def test_view_targets_types(targets, array_type):
    path, _ = targets
    with ringfeed.Loader(path, 4, **dict(TKW, array_type=array_type)) as ld:
        b = next(iter(ld))
        assert len(b.view_masks) == len(SHAPES)
        for k in range(len(SHAPES)):
            t = b.view_targets(k)
            assert len(t) == 4 and set(t[0]) == {"boxes", "labels", "keypoints"}
            if array_type == "torch":
                import torch
                assert isinstance(b.view_masks[k], torch.Tensor)
                assert t[0]["labels"].dtype == torch.int64
        assert all(np.array_equal(npy(x["boxes"]), npy(y["boxes"]))
                   for x, y in zip(b.targets(), b.view_targets(0)))
        with pytest.raises(IndexError):
            b.view_targets(len(SHAPES))


@pytest.mark.parametrize("what, reason, words", [
    ("mask", "mask", "a mask must have its image's size"), ("box", "label", "lies outside")])
def test_bad_view_targets_named_or_counted(tmp_path, what, reason, words):
    path = str(tmp_path / "bad-000000.tar")
    _targets_shard(path, bad=(3, what))
    with ringfeed.Loader(path, 4, **TKW) as ld:
        with pytest.raises(ringfeed.RingfeedError) as e:
            for _ in ld:
                pass
    assert "00000003" in str(e.value) and words in str(e.value)
    with ringfeed.Loader(path, 4, on_error="skip", **TKW) as ld:
        keys = [k for b in ld for k, p in zip(b.keys, b.is_padding) if not p]
        st = ld.epoch_stats()
    assert "00000003" not in keys
    assert st["skipped_by_reason"][reason] == st["skipped"] == 1


def test_bench_multi_crop_with_masks_and_boxes(targets):
    """ringfeed-bench takes --multi-crop with --mask and the box flags together."""
    import subprocess
    from conftest import find_tool
    exe = find_tool("tools", "ringfeed-bench", "RINGFEED_BENCH")
    if exe is None:
        pytest.skip("ringfeed-bench not found (build it, or set RINGFEED_BENCH)")
    path, _ = targets
    p = subprocess.run([exe, "--shards", path, "--device", "host", "--batch", "4", "--epochs",
                        "1", "--multi-crop", VIEWS, "--mask", "seg.png", "--box-json-path",
                        "boxes", "--max-boxes", "3", "--keypoint-json-path", "kp",
                        "--max-points", "3"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
