#!/usr/bin/env python3
"""Train a torchvision segmentation or detection model from tar shards whose samples carry
their targets beside the image: a segmentation mask (`KEY.seg.png`, class ids) and boxes with
their classes (`KEY.json`). ringfeed gives each target the crop, resize and flip its image got,
on the decode threads; the loop only moves tensors to the device. Prints one JSON line: images/s
over the measured steps, the fraction of the time the loop waited for input, the last loss.

  python3 train_dense.py --task segmentation --shards 'ade-*.tar' --classes 150
  python3 train_dense.py --task detection --shards 'coco-*.tar' --classes 91 \\
      --box-path annotations.bbox --box-format xywh --class-path annotations.category_id
  python3 train_dense.py --make-shards toy          # a small set of shapes to try it on

--make-shards writes such shards: noisy backgrounds with one to three rectangles or discs of
random classes 1..--classes, each sample KEY.jpg (4:2:0, quality 90), KEY.seg.png (8-bit gray,
0 background) and KEY.json ({"boxes": [[x1, y1, x2, y2], ...], "classes": [...]}), then trains
on them. Segmentation: LR-ASPP MobileNetV3, cross entropy with mask_fill (255) ignored.
Detection: Faster R-CNN MobileNetV3 320 FPN on batch.targets(), class 0 the background.
"""
import argparse
import io
import json
import os
import random
import sys
import tarfile
import time

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package beside examples/, without installing
import ringfeed  # noqa: E402

MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)


def make_shards(out_dir, images, per_shard, classes, seed=0):
    """Shards of shapes on noise with their masks and boxes; returns their glob pattern."""
    from PIL import Image, ImageDraw
    rng = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)

    def add(tf, name, data):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))

    tf = None
    for i in range(images):
        if i % per_shard == 0:
            if tf:
                tf.close()
            tf = tarfile.open(os.path.join(out_dir, f"toy-{i // per_shard:06d}.tar"), "w")
        w, h = rng.randint(160, 400), rng.randint(160, 400)
        noise = np.random.default_rng(seed * 100003 + i).integers(0, 256, (h, w, 3), np.uint8)
        img = Image.fromarray(noise // 4 + 96)
        mask = Image.new("L", (w, h), 0)
        di, dm = ImageDraw.Draw(img), ImageDraw.Draw(mask)
        boxes, ids = [], []
        for _ in range(rng.randint(1, 3)):
            c = rng.randint(1, classes)
            bw, bh = rng.randint(w // 6, w // 2), rng.randint(h // 6, h // 2)
            x, y = rng.randint(0, w - bw), rng.randint(0, h - bh)
            shape = di.ellipse if c % 2 else di.rectangle
            colour = tuple(rng.randint(0, 255) for _ in range(3))
            shape([x, y, x + bw - 1, y + bh - 1], fill=colour)
            (dm.ellipse if c % 2 else dm.rectangle)([x, y, x + bw - 1, y + bh - 1], fill=c)
            boxes.append([x, y, x + bw, y + bh])
            ids.append(c)
        jpg, png = io.BytesIO(), io.BytesIO()
        img.save(jpg, "JPEG", quality=90)
        mask.save(png, "PNG")
        key = f"{i:08d}"
        add(tf, key + ".jpg", jpg.getvalue())
        add(tf, key + ".seg.png", png.getvalue())
        add(tf, key + ".json", json.dumps({"boxes": boxes, "classes": ids}).encode())
    tf.close()
    return os.path.join(out_dir, "toy-*.tar")


def loader_for(a, device):
    """The ringfeed loader of the task: images with masks, or with boxes and their classes."""
    kw = dict(size=a.size, device=device, decode_threads=a.threads, label=None, seed=a.seed,
              drop_last=True, on_error="skip", array_type="torch")
    if a.task == "segmentation":
        return ringfeed.Loader(a.shards, a.batch, layout="nchw", dtype="float32", mean=MEAN,
                               std=STD, mask="seg.png", **kw)
    return ringfeed.Loader(a.shards, a.batch, layout="nchw", box_json_path=a.box_path,
                           box_class_json_path=a.class_path, box_format=a.box_format,
                           max_boxes=a.max_boxes, box_min_visibility=0.25, **kw)


def model_for(a):
    if a.task == "segmentation":
        from torchvision.models.segmentation import lraspp_mobilenet_v3_large
        return lraspp_mobilenet_v3_large(weights=None, weights_backbone=None,
                                         num_classes=a.classes + 1)
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn
    return fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None,
                                                 num_classes=a.classes + 1)


def loss_of(a, model, batch, device):
    """One step's loss: the batch's targets as the model takes them, on its device."""
    if a.task == "segmentation":
        target = batch.masks.to(device, non_blocking=True).long()
        return F.cross_entropy(model(batch.images)["out"], target, ignore_index=255)
    images = list((batch.images.float() / 255).unbind(0))  # the model normalizes itself
    targets = [{"boxes": t["boxes"].to(device), "labels": t["labels"].to(device)}
               for t in batch.targets()]
    return sum(model(images, targets).values())


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", choices=("segmentation", "detection"), default="segmentation")
    ap.add_argument("--shards", help="tar shards (glob); default: those --make-shards wrote")
    ap.add_argument("--make-shards", metavar="DIR", help="write the toy set there first")
    ap.add_argument("--images", type=int, default=256, help="--make-shards: images")
    ap.add_argument("--classes", type=int, default=4, help="classes, the background not counted")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5, help="steps not measured")
    ap.add_argument("--threads", type=int, default=0, help="decode threads (0: the default)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--box-path", default="boxes", help="box_json_path")
    ap.add_argument("--class-path", default="classes", help="box_class_json_path")
    ap.add_argument("--box-format", default="xyxy", choices=("xyxy", "xywh", "cxcywh"))
    ap.add_argument("--max-boxes", type=int, default=16)
    a = ap.parse_args(argv)
    if a.make_shards:
        a.shards = make_shards(a.make_shards, a.images, 64, a.classes, a.seed)
    if not a.shards:
        ap.error("--shards or --make-shards is required")
    a.threads = a.threads or None
    return a


def main(argv=None):
    a = parse_args(argv)
    device = torch.device(a.device)
    model = model_for(a).to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    ld = loader_for(a, "cuda" if device.type == "cuda" else "cpu")
    step, waited, images, t0, loss = 0, 0.0, 0, None, None
    epoch = ld.epoch
    with ld:
        while step < a.steps:
            ld.set_epoch(epoch)
            it = iter(ld)
            while step < a.steps:
                tw = time.perf_counter()
                batch = next(it, None)
                if batch is None:
                    break
                if step == a.warmup:
                    waited, images, t0 = 0.0, 0, time.perf_counter()
                elif t0 is not None:
                    waited += time.perf_counter() - tw
                loss = loss_of(a, model, batch, device)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                loss = loss.item()  # the step's end, as a training loop logging it reaches
                images += len(batch.keys) if t0 is not None else 0
                step += 1
            epoch += 1
        span = time.perf_counter() - t0 if t0 else 0.0
        stats = ld.stats()
    print(json.dumps({"task": a.task, "device": str(device), "torchvision": torchvision.__version__,
                      "steps": step, "img_per_s": round(images / span, 1) if span else None,
                      "waited": round(waited / span, 4) if span else None, "loss": loss,
                      "skipped": stats["skipped"]}))


if __name__ == "__main__":
    main()
