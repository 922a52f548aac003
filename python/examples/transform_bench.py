#!/usr/bin/env python3
"""Images per second of Loader(transform=fn) at several transform thread counts, next to the
loader without a transform and the same work done per batch on the training thread; prints
one JSON line per run (docs/python.md, "Per-sample transforms in Python").

  python3 transform_bench.py --shards 'dense/dense-*.tar' --threads 1,4,16
  python3 transform_bench.py --shards 'data/train/train-*.tar' --transform identity

Transforms: "jitter" (brightness, contrast and saturation in NumPy with a per-sample random
draw from the key, as a user would write one), "identity" (returns its input: what a call
costs by itself). The per-batch run applies the jitter to the whole batch array at once on
the consuming thread, one draw per batch.
"""
import argparse
import json
import os
import platform
import sys
import sysconfig
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package beside examples/, without installing
import ringfeed  # noqa: E402


def _jitter(x, rng, axis_mean):
    """Brightness, contrast and saturation factors in 0.6..1.4 on float pixels x."""
    x *= rng.uniform(0.6, 1.4)
    m = x.mean(axis=axis_mean, keepdims=True)
    x -= m
    x *= rng.uniform(0.6, 1.4)
    x += m
    g = x.mean(axis=-1, keepdims=True)
    x -= g
    x *= rng.uniform(0.6, 1.4)
    x += g
    return np.clip(x, 0, 255, out=x).astype(np.uint8)


def jitter(img, key):
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    return _jitter(img.astype(np.float32), rng, None)


def identity(img):
    return img


TRANSFORMS = {"jitter": jitter, "identity": identity}


def measure(a, threads=None, transform=None, per_batch=False):
    """img/s over a.images images after a.warmup batches (epoch after epoch), and the
    process's CPU time per image (every thread's, user and system): on a machine shared with
    other work the wall-clock rate moves with their load, the CPU cost much less."""
    kw = dict(size=a.size, layout="NHWC", dtype="uint8", device="cpu", array_type="numpy",
              seed=a.seed)
    if transform is not None:
        kw.update(transform=transform, transform_threads=threads)
    elif threads:
        kw["decode_threads"] = threads
    rng = np.random.default_rng(a.seed)
    with ringfeed.Loader(a.shards, a.batch, **kw) as ld:
        decode_threads = ld.stats()["decode_threads"]

        def batches():
            epoch = ld.epoch
            while True:
                ld.set_epoch(epoch)
                yield from ld
                epoch += 1
        it = batches()
        for _ in range(a.warmup):
            next(it)
        n, t0, c0 = 0, time.perf_counter(), _cpu_s()
        while n < a.images:
            b = next(it)
            if per_batch:
                _jitter(np.asarray(b.images, dtype=np.float32), rng, (1, 2, 3))
            n += b.count
        dt, cpu = time.perf_counter() - t0, _cpu_s() - c0
    return {"img_per_s": round(n / dt, 1), "cpu_ms_per_img": round(cpu * 1e3 / n, 2),
            "images": n, "decode_threads": decode_threads,
            "load": round(os.getloadavg()[0], 1)}


def _cpu_s():
    t = os.times()
    return t.user + t.system


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", required=True, help="glob/brace pattern of tar shards")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--images", type=int, default=1000, help="measured images per run")
    ap.add_argument("--warmup", type=int, default=2, help="unmeasured first batches")
    ap.add_argument("--threads", default="1,4,16", help="transform thread counts")
    ap.add_argument("--transform", default="jitter", choices=sorted(TRANSFORMS))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    py = {"python": platform.python_version(),
          "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
          "cpus": ringfeed.cpu_count(), "batch": a.batch, "size": a.size}
    runs = [("none", None, None, False), (f"{a.transform} per batch", None, None, True)]
    runs += [(a.transform, int(t), TRANSFORMS[a.transform], False)
             for t in a.threads.split(",")]
    for name, threads, fn, per_batch in runs:
        rec = dict(py, transform=name, transform_threads=threads)
        rec.update(measure(a, threads, fn, per_batch))
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
