"""python/examples/train_dense.py (issue 46's detection and segmentation example) runs both
tasks on the toy shards it writes, on the CPU: the loss is finite, every measured step counted,
and the toy set's targets are what the loader delivers (each mask's classes are the boxes'
classes, every box inside the output). Needs torch and torchvision; skipped without."""
import importlib.util
import json
import math
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")

import ringfeed  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "train_dense.py")


def example():
    spec = importlib.util.spec_from_file_location("train_dense", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("task", ["segmentation", "detection"])
def test_example_trains(task, tmp_path, capsys):
    example().main(["--task", task, "--make-shards", str(tmp_path), "--images", "40",
                    "--steps", "4", "--warmup", "1", "--batch", "4", "--size", "96",
                    "--device", "cpu", "--threads", "2"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["task"] == task and out["steps"] == 4
    assert math.isfinite(out["loss"]) and out["img_per_s"] > 0
    assert out["skipped"] == 0


def test_toy_targets_follow_the_crop(tmp_path):
    pattern = example().make_shards(str(tmp_path), 24, 8, classes=4, seed=3)
    with ringfeed.Loader(pattern, 8, size=64, device="cpu", label=None, mask="seg.png",
                         box_json_path="boxes", box_class_json_path="classes", max_boxes=8,
                         array_type="numpy", decode_threads=2) as ld:
        for b in ld:
            for i in range(len(b.keys)):
                n = int(b.box_counts[i])
                boxes, classes = b.boxes[i, :n], b.box_classes[i, :n]
                assert (boxes >= 0).all() and (boxes <= 64).all()  # inside the 64 x 64 output
                seen = set(int(v) for v in set(b.masks[i].ravel().tolist())) - {0}
                # a class painted under an output pixel's centre lies in one of its shapes'
                # boxes, which then keeps a positive area in the crop (box_min_visibility 0)
                assert seen <= set(int(c) for c in classes), (b.keys[i], seen, classes)
