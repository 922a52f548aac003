"""multi_crop= (issue 46 item 5): K views per sample, decoded once. batch.views is a list of
per-view arrays (numpy or torch, (N, H_k, W_k, 3) or (N, 3, H_k, W_k), zero-copy slices of
batch.images), batch.view_boxes and batch.view_flips their boxes and flips; each view is its
reported box cut from the source with PIL, resized (antialiased bilinear) and flipped when
reported, within test_size.py's PIL bounds (at full scale; DCT-scaled views are the library's
own single-view decodes, tests/test_multicrop.c); the same seed gives the same views at any
thread count, a resumed loader the uninterrupted one's; float outputs are each view
normalized; the GPU paths (host emulation) cut the CPU's views; bad text is a ValueError naming
multi_crop."""

import numpy as np
import pytest

import ringfeed
from conftest import ARRAY_TYPES, shard_sources

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
        assert b.views == [] and b.view_boxes == [] and b.view_flips == []
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
