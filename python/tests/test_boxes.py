"""Boxes and keypoints that follow the crop (issue 46): KEY.json boxes in every box_format,
pixels or normalised, COCO-style objects with category ids, KEY.boxes.npy written by numpy
itself (float32 and float64), and keypoints, in shards written by Python's tarfile; delivered
as batch.boxes (float32 N x max_boxes x 4, xyxy in output pixels), box_classes, box_counts,
points and point_counts, numpy or torch, owned copies. The reference maps each box with numpy
through the batch's own crop_boxes and flips (RANDOM crops), clips it to the output and drops
it by box_min_visibility, at 1 and 3 decode threads; targets() gives each sample's valid ones;
bad boxes are a `label` error naming the member and its offset, or a counted skip. The exact
check on every decode path is tests/test_boxes.c's."""
import io
import json

import numpy as np
import pytest

import ringfeed
from conftest import ARRAY_TYPES, map_boxes, map_points, shard_jpegs, write_tar

H, W = 32, 48
N = 11
MAXB, MAXP = 5, 3
KW = dict(size=(H, W), device="cpu", seed=3, label=None, max_boxes=MAXB, scale=(0.2, 1.0))


def annotations(sizes):
    """Per sample (w, h): boxes xyxy (k, 4) in pixels on a quarter-pixel grid, class ids and
    keypoints (p, 3) with COCO visibility."""
    rng = np.random.default_rng(46)
    out = []
    for i, (w, h) in enumerate(sizes):
        k = 0 if i == 4 else int(rng.integers(1, MAXB + 1))
        x1 = np.floor(rng.uniform(0, w - 2, k) * 4) / 4
        y1 = np.floor(rng.uniform(0, h - 2, k) * 4) / 4
        x2 = np.floor(rng.uniform(x1 + 1, w) * 4) / 4
        y2 = np.floor(rng.uniform(y1 + 1, h) * 4) / 4
        boxes = np.stack([x1, y1, x2, y2], 1).reshape(k, 4)
        cls = rng.integers(0, 80, k)
        p = int(rng.integers(1, MAXP + 1))
        pts = np.stack([np.floor(rng.uniform(0, w, p) * 4) / 4,
                        np.floor(rng.uniform(0, h, p) * 4) / 4,
                        rng.integers(0, 3, p)], 1)
        out.append((boxes, cls, pts))
    return out


def formats(boxes, w, h):
    x1, y1, x2, y2 = boxes.T
    return {"xyxy": boxes, "xywh": np.stack([x1, y1, x2 - x1, y2 - y1], 1),
            "cxcywh": np.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], 1),
            "norm": boxes / [w, h, w, h]}


def npy_bytes(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def write(path, jpegs, docs, npys, kps=None):
    """KEY.jpg, KEY.json, KEY.boxes.npy (npys[i] when not None) and KEY.kp.npy (kps[i])."""
    members = []
    for i, (jpg, doc, arr) in enumerate(zip(jpegs, docs, npys)):
        members += [(f"{i:08d}.jpg", jpg), (f"{i:08d}.json", doc)]
        if arr is not None:
            members.append((f"{i:08d}.boxes.npy", npy_bytes(arr)))
        if kps is not None:
            members.append((f"{i:08d}.kp.npy", npy_bytes(kps[i])))
    return write_tar(path, members)


@pytest.fixture(scope="module")
def data(shards, tmp_path_factory):
    from PIL import Image
    jpegs = shard_jpegs(shards, N)
    sizes = [Image.open(io.BytesIO(j)).size for j in jpegs]
    ann = annotations(sizes)
    docs, npys = [], []
    for (w, h), (boxes, cls, pts) in zip(sizes, ann):
        doc = {k: v.tolist() for k, v in formats(boxes, w, h).items()}
        doc["cls"] = cls.tolist()
        doc["coco"] = {"annotations": [{"bbox": b.tolist(), "category_id": int(c)}
                                       for b, c in zip(formats(boxes, w, h)["xywh"], cls)]}
        doc["kp"] = pts.tolist()
        doc["label"] = len(docs)
        doc["nkp"] = (pts / [w, h, 1]).tolist()  # box_normalized reads keypoints so too
        docs.append(json.dumps(doc).encode())
        arr = np.concatenate([boxes, cls[:, None]], 1)
        npys.append(arr.astype(np.float32 if len(npys) % 2 else np.float64))
    path = str(tmp_path_factory.mktemp("boxes") / "bx-000000.tar")
    kps = [pts.astype(np.float32 if i % 2 else np.float64) for i, (_, _, pts) in enumerate(ann)]
    write(path, jpegs, docs, npys, kps)
    return path, jpegs, sizes, ann, docs, npys


def npy(x):
    return x if isinstance(x, np.ndarray) else x.numpy()


def epoch(path, **kw):
    """{key: (boxes, classes, count, points, point count, crop box, flip)} of one epoch."""
    out = {}
    with ringfeed.Loader(path, 4, **dict(KW, **kw)) as ld:
        for b in ld:
            for i, key in enumerate(b.keys):
                row = (npy(b.boxes[i]).copy(), npy(b.box_classes[i]).copy(),
                       int(b.box_counts[i]),
                       npy(b.points[i]).copy() if b.points is not None else None,
                       int(b.point_counts[i]) if b.points is not None else 0,
                       npy(b.crop_boxes[i]).copy(), bool(b.flips[i]))
                out[key] = row
    return out


CASES = [dict(box_json_path="xyxy", box_class_json_path="cls"),
         dict(box_json_path="xywh", box_format="xywh"),
         dict(box_json_path="cxcywh", box_format="cxcywh", box_class_json_path="cls"),
         dict(box_json_path="norm", box_normalized=True, box_class_json_path="cls"),
         dict(box_json_path="coco.annotations.bbox", box_format="xywh",
              box_class_json_path="coco.annotations.category_id"),
         dict(box_ext="boxes.npy"),
         dict(box_ext="boxes.npy", keypoint_ext="kp.npy"),
         dict(box_json_path="xyxy", box_class_json_path="cls", box_min_visibility=0.6),
         dict(box_json_path="norm", box_normalized=True, box_class_json_path="cls",
              box_output_normalized=True)]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_boxes_follow_the_crop(data, case, threads):
    path, _, _, ann, _, _ = data
    kw = CASES[case]
    kp = None if "keypoint_ext" in kw else "nkp" if kw.get("box_normalized") else "kp"
    got = epoch(path, decode_threads=threads, keypoint_json_path=kp, max_points=MAXP, **kw)
    assert len(got) == N
    dropped = 0
    for i, (boxes, cls, _) in enumerate(ann):
        rows, classes, count, pts, npts, crop, flip = got[f"{i:08d}"]
        want, idx = map_boxes(boxes, crop, flip, (H, W), kw.get("box_min_visibility", 0.0))
        dropped += len(boxes) - len(idx)
        assert count == len(idx), (i, count, len(idx))
        assert rows.dtype == np.float32 and rows.shape == (MAXB, 4)
        scale = [1 / W, 1 / H] if kw.get("box_output_normalized") else [1, 1]
        np.testing.assert_allclose(rows[:count], want * (scale * 2), atol=2e-3)
        assert not rows[count:].any()
        has_cls = "box_class_json_path" in kw or "box_ext" in kw
        assert list(classes) == (list(cls[idx]) if has_cls else [-1] * count) + \
            [-1] * (MAXB - count)
        assert npts == len(ann[i][2])
        np.testing.assert_allclose(pts[:npts], map_points(ann[i][2], crop, flip, (H, W)) *
                                   (scale + [1]), atol=2e-3)
    assert dropped > 0  # RANDOM crops cut some away


@pytest.mark.parametrize("array_type", ARRAY_TYPES)
def test_arrays_targets_and_copies(data, array_type):
    path = data[0]
    ld = ringfeed.Loader(path, 4, array_type=array_type, keypoint_json_path="kp",
                         max_points=MAXP, box_json_path="xyxy", box_class_json_path="cls", **KW)
    it = iter(ld)
    kept = next(it).keep()
    assert kept.boxes.shape == (4, MAXB, 4) and kept.box_classes.shape == (4, MAXB)
    assert kept.points.shape == (4, MAXP, 3) and kept.box_counts.shape == (4,)
    if array_type == "torch":
        import torch
        assert kept.boxes.dtype == torch.float32 and kept.box_classes.dtype == torch.int32
    else:
        assert kept.boxes.dtype == np.float32 and kept.box_counts.dtype == np.int32
    before = npy(kept.boxes).copy()
    targets = kept.targets()
    kept.release()
    for _ in it:  # the slot is reused; the kept batch's arrays are its own
        pass
    ld.close()
    assert np.array_equal(npy(kept.boxes), before)
    assert len(targets) == 4
    for i, t in enumerate(targets):
        k = int(kept.box_counts[i])
        assert npy(t["boxes"]).shape == (k, 4) and npy(t["labels"]).dtype == np.int64
        assert np.array_equal(npy(t["labels"]), npy(kept.box_classes[i, :k]).astype(np.int64))
        assert npy(t["keypoints"]).shape == (int(kept.point_counts[i]), 3)


def test_label_from_the_same_member(data):
    """The label's member may be the boxes' too: both come from the one KEY.json."""
    with ringfeed.Loader(data[0], 4, box_json_path="xyxy", **dict(KW, label="json:label")) as ld:
        for b in ld:
            for key, lab, n in zip(b.keys, b.labels, b.box_counts):
                assert int(lab) == int(key)
                assert 0 <= int(n) <= len(data[3][int(key)][0])


def test_off_is_none(data):
    with ringfeed.Loader(data[0], 4, size=(H, W), device="cpu", label=None) as ld:
        b = next(iter(ld))
        assert b.boxes is None and b.box_counts is None and b.points is None
        assert b.targets() == [{}] * 4


def test_bad_boxes_named_or_skipped(data, tmp_path):
    _, jpegs, _, _, docs, npys = data
    bad = list(npys[:4])
    bad[2] = np.array([[1, 1, 3, np.nan, 0]], np.float32)
    path = str(tmp_path / "bad-000000.tar")
    offsets = write(path, jpegs[:4], docs[:4], bad)
    with pytest.raises(ringfeed.RingfeedError) as ei:
        for _ in ringfeed.Loader(path, 2, box_ext="boxes.npy", **KW):
            pass
    assert ei.value.code == ringfeed._capi.RF_ELABEL
    want = f"box member 00000002.boxes.npy at offset {offsets['00000002.boxes.npy']}"
    assert want in str(ei.value) and "box 0" in str(ei.value) and "not finite" in str(ei.value)
    with ringfeed.Loader(path, 2, box_ext="boxes.npy", on_error="skip", **KW) as ld:
        keys = [k for b in ld for k, p in zip(b.keys, b.is_padding) if not p]
        st = ld.epoch_stats()  # not stats(): the next epoch's prefetch may have met it too
    assert "00000002" not in keys and len(keys) == 3
    assert st["final"] and st["skipped_by_reason"]["label"] == st["skipped"] == 1
    with pytest.raises(ringfeed.RingfeedError, match="max_boxes"):
        ringfeed.Loader(path, 2, **dict(KW, max_boxes=None), box_json_path="xyxy")
    with pytest.raises(ValueError, match="box_format"):
        ringfeed.Loader(path, 2, box_json_path="xyxy", box_format="yxyx", **KW)


@pytest.mark.parametrize("arr, words", [
    (np.zeros((2, 4), np.float32), "its shape is not (N, 2) or (N, 3)"),
    (np.array([[1, 1, 5]], np.float64), "point 0 has visibility 5, not 0, 1 or 2"),
    (np.zeros((MAXP + 1, 2), np.float32), f"{MAXP + 1} points, more than max_points {MAXP}"),
])
def test_bad_npy_keypoints_named(data, tmp_path, arr, words):
    _, jpegs, _, ann, docs, npys = data
    kps = [a[2] for a in ann[:4]]
    kps[1] = arr
    path = str(tmp_path / "badkp-000000.tar")
    offsets = write(path, jpegs[:4], docs[:4], npys[:4], kps)
    with pytest.raises(ringfeed.RingfeedError) as ei:
        for _ in ringfeed.Loader(path, 2, box_ext="boxes.npy", keypoint_ext="kp.npy",
                                 max_points=MAXP, **KW):
            pass
    assert ei.value.code == ringfeed._capi.RF_ELABEL
    assert f"keypoint member 00000001.kp.npy at offset {offsets['00000001.kp.npy']}" in \
        str(ei.value) and words in str(ei.value), str(ei.value)
    with pytest.raises(ringfeed.RingfeedError, match="a .npy member is the array of points"):
        ringfeed.Loader(path, 2, keypoint_ext="kp.npy", keypoint_json_path="kp",
                        max_points=MAXP, **KW)
