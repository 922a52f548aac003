#!/usr/bin/env python3
"""Per-batch GPU transforms on ringfeed batches: torchvision.transforms.v2 applied to the CUDA
tensor the loader hands out, on torch's current stream, then normalization; prints the measured
cost as one JSON line (ms per batch with and without the transforms).

  python3 gpu_transforms.py --shards 'data/train/train-*.tar' --batches 200
  python3 gpu_transforms.py --shards 'data/train/train-*.tar' --per-sample
  python3 gpu_transforms.py --shards 'data/train/train-*.tar' --device cpu   # host backend

The recipe is `augmented()` below (docs/python.md, "Per-batch GPU transforms"). ringfeed makes
torch's current stream wait for each batch's copy before handing it out and releases the batch
in order on that stream, so transforms queued there read the batch after its copy and before
its memory is recycled, without a synchronization. Their outputs are new tensors from torch's
allocator: the loader's buffer is only read.
"""
import argparse
import json
import os
import sys
import time

import torch
from torchvision.transforms import v2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package beside examples/, without installing
import ringfeed  # noqa: E402

MASK64 = (1 << 64) - 1


def batch_seed(seed, epoch, index):
    """A seed for one batch's random draws, from (seed, epoch, batch index) only: the same
    batch gets the same draws in every run, whatever the training loop drew meanwhile."""
    h = (seed * 0x9E3779B97F4A7C15 + epoch * 0xBF58476D1CE4E5B9 + index) & MASK64
    h ^= h >> 31
    return ((h * 0x94D049BB133111EB) & MASK64) >> 1  # 63 bits: any torch seed


def augmented(loader, transform, mean, std, seed=0, per_sample=False, out_dtype=None):
    """Yield (images, labels) of each batch of one epoch of `loader` (a uint8 ringfeed.Loader,
    either layout): images as an NCHW view (channels_last memory for an NHWC loader), passed
    through `transform` (None: none) on the tensor's own device and torch's current stream,
    then normalized to out_dtype (default float32) with mean/std in pixel units.

    torchvision's v2 transforms draw their random parameters once per call, so a batch-wise
    call gives every image of the batch the same draw; per_sample=True calls the transform on
    each image (its own draw, one launch per image and operation). The draws come from torch's
    generators seeded per batch (batch_seed), inside torch.random.fork_rng, so they are
    reproducible and leave the caller's random state as it was."""
    out_dtype = out_dtype or torch.float32
    mean_t = std_t = None
    for b in loader:
        x = b.images.permute(0, 3, 1, 2) if b.images.shape[-1] == 3 else b.images
        if mean_t is None:
            mean_t = torch.tensor(mean, device=x.device, dtype=torch.float32).view(1, 3, 1, 1)
            std_t = torch.tensor(std, device=x.device, dtype=torch.float32).view(1, 3, 1, 1)
        if transform is not None:
            x = seeded(transform, x, batch_seed(seed, b.epoch, b.index), per_sample)
        yield ((x.float() - mean_t) / std_t).to(out_dtype), b.labels


def seeded(transform, x, s, per_sample):
    """transform(x) with torch's CPU generator, and the CUDA one of x's device, seeded to s for
    the call and restored afterwards."""
    devices = [x.device.index if x.device.index is not None else torch.cuda.current_device()] \
        if x.is_cuda else []
    with torch.random.fork_rng(devices=devices):
        torch.default_generator.manual_seed(s)
        if x.is_cuda:
            with torch.cuda.device(x.device):
                torch.cuda.manual_seed(s)
        if per_sample:
            return torch.stack([transform(img) for img in x])
        return transform(x)


def default_transform():
    """Colour jitter and random grayscale: the photometric half of a common ImageNet recipe
    (the geometric half, RandomResizedCrop and flip, is ringfeed's own)."""
    return v2.Compose([v2.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4),
                       v2.RandomGrayscale(p=0.2)])


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
