#!/usr/bin/env python3
"""Per-batch GPU transforms on ringfeed batches: torchvision.transforms.v2 applied to the CUDA
tensor the loader hands out, on torch's current stream, then normalization; prints the measured
cost as one JSON line (ms per batch with and without the transforms).

  python3 gpu_transforms.py --shards 'data/train/train-*.tar' --batches 200
  python3 gpu_transforms.py --shards 'data/train/train-*.tar' --per-sample
  python3 gpu_transforms.py --shards 'data/train/train-*.tar' --device cpu   # host backend

The recipe is `ringfeed.transforms.augmented()` (docs/python.md, "Per-batch GPU transforms"),
imported here from the package; this script times it.
"""
import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package beside examples/, without installing
import ringfeed  # noqa: E402
from ringfeed.transforms import augmented, default_transform  # noqa: E402


class Timed:
    """transform, with the time of each call: CUDA events on the current stream for CUDA
    tensors (read after a synchronize at the end), wall time for CPU tensors."""

    def __init__(self, fn):
        self.fn, self.events, self.cpu_s = fn, [], 0.0

    def __call__(self, x):
        if not x.is_cuda:
            t0 = time.perf_counter()
            y = self.fn(x)
            self.cpu_s += time.perf_counter() - t0
            return y
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        y = self.fn(x)
        end.record()
        self.events.append((start, end))
        return y

    def total_ms(self):
        return self.cpu_s * 1e3 + sum(s.elapsed_time(e) for s, e in self.events)


def run(a, transform, timed=None):
    """ms per batch over a.batches batches after a.warmup, end to end (next batch, transform,
    normalization; synchronized at the end on CUDA)."""
    kw = dict(size=a.size, layout="NHWC", dtype="uint8", device=a.device, seed=a.seed,
              decode_threads=a.decode_threads)
    cuda = a.device != "cpu"
    with ringfeed.Loader(a.shards, a.batch, **kw) as ld:
        def batches():  # epoch after epoch, as python/examples/train_resnet.py loops
            epoch = ld.epoch
            while True:
                ld.set_epoch(epoch)
                yield from augmented(ld, transform, ringfeed.IMAGENET_MEAN,
                                     ringfeed.IMAGENET_STD, a.seed, a.per_sample)
                epoch += 1
        it = batches()
        for _ in range(a.warmup):
            next(it)
        if timed is not None:
            timed.events, timed.cpu_s = [], 0.0
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.batches):
            x, _ = next(it)
        if cuda:
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / a.batches, x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", required=True, help="glob/brace pattern of tar shards")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batches", type=int, default=100, help="measured batches")
    ap.add_argument("--warmup", type=int, default=10, help="unmeasured first batches")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (host backend)")
    ap.add_argument("--decode-threads", type=int, default=0, help="0: ringfeed's default")
    ap.add_argument("--per-sample", action="store_true",
                    help="one transform call per image (its own random draw)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    timed = Timed(default_transform())
    plain_ms, _ = run(a, None)
    with_ms, x = run(a, timed, timed)
    if a.device != "cpu":
        torch.cuda.synchronize()
    print(json.dumps({
        "device": str(x.device), "batch": a.batch, "size": a.size, "batches": a.batches,
        "per_sample": a.per_sample, "transform": "ColorJitter(0.4, 0.4, 0.4) + "
        "RandomGrayscale(0.2)", "ms_per_batch_plain": round(plain_ms, 3),
        "ms_per_batch_transforms": round(with_ms, 3),
        "transform_ms_per_batch": round(timed.total_ms() / a.batches, 3)}))


if __name__ == "__main__":
    main()
