"""Run by test_gpu.py under torchrun: one loader per rank (RANK/WORLD_SIZE from torchrun), each
writes `key label is_padding` per sample of one epoch to OUT/rank{RANK}.txt."""
import argparse
import os

import torch

import ringfeed

ap = argparse.ArgumentParser()
ap.add_argument("--shards", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--schedule", default="auto")
a = ap.parse_args()
local = int(os.environ.get("LOCAL_RANK", 0))
torch.cuda.set_device(local % torch.cuda.device_count())
rank = int(os.environ["RANK"])
with ringfeed.Loader(a.shards, 4, size=32, device="cuda", seed=3, decode_threads=2,
                     schedule=a.schedule) as ld:
    assert ld.device == f"cuda:{torch.cuda.current_device()}"
    rows = []
    for images, labels in (ld):
        pass
    ld.set_epoch(0)
    for b in ld:
        assert b.images.device.index == torch.cuda.current_device()
        labs = b.labels.cpu().tolist()
        rows += [f"{k} {l} {int(p)}" for k, l, p in zip(b.keys, labs, b.is_padding)]
with open(os.path.join(a.out, f"rank{rank}.txt"), "w") as f:
    f.write("\n".join(rows) + "\n")
