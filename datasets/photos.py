#!/usr/bin/env python3
"""photos.py — a test set of real photographs in WebDataset shards, written by Python's tarfile.

The generator (ringfeed-gen) makes synthetic images whose sides are ImageNet-like and whose
encoder is always libjpeg at quality 90; a property checked only on them is not known to hold
for users' data. This script cuts crops of every size (sides drawn uniformly from --min-side to
--max-side, so almost never multiples of 8 or 16, at any offset) out of real photographs (by
default the photos of Debian's mate-backgrounds package, /usr/share/backgrounds/mate/nature),
and encodes each with cjpeg (libjpeg-turbo-progs) at a quality drawn from 75..95, 4:2:0, with or
without optimized Huffman tables, some with restart markers (--restart-share) or progressive
(--progressive-share). Shards are written with Python's tarfile (GNU format), KEY.jpg + KEY.cls.
Everything is a function of --seed: the same command writes the same bytes.

    datasets/photos.py --output 'out/photos-%04d.tar' --images 512 --per-shard 128

needs: apt-get install mate-backgrounds libjpeg-turbo-progs (tools/deps.sh installs both).
"""
import argparse
import glob
import io
import os
import random
import subprocess
import sys
import tarfile

DEFAULT_SOURCES = "/usr/share/backgrounds/mate/nature/*.jpg"


def read_ppm(data):
    """(width, height, rgb bytes) of a binary P6 PPM with maxval 255, as djpeg writes it."""
    fields, pos = [], 0
    while len(fields) < 4:
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos)
            continue
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    if fields[0] != b"P6" or fields[3] != b"255":
        raise ValueError("not an 8-bit P6 PPM")
    w, h = int(fields[1]), int(fields[2])
    return w, h, data[pos + 1:pos + 1 + w * h * 3]


def load_sources(pattern, max_side):
    """Every source photo decoded once (djpeg), halved until its long side is <= 2 * max_side so
    that crops of max_side still hold detail and memory stays small."""
    paths = sorted(glob.glob(pattern))
    if not paths:
        sys.exit(f"photos.py: no photographs match {pattern} "
                 "(apt-get install mate-backgrounds, or pass --sources)")
    out = []
    for p in paths:
        with open(p, "rb") as f:
            head = subprocess.run(["djpeg", "-pnm"], stdin=f, capture_output=True, check=True)
        w, h, rgb = read_ppm(head.stdout)
        scale = 1
        while max(w, h) // scale > 2 * max_side and scale < 8:
            scale *= 2
        if scale > 1:
            with open(p, "rb") as f:
                r = subprocess.run(["djpeg", "-pnm", "-scale", f"1/{scale}"], stdin=f,
                                   capture_output=True, check=True)
            w, h, rgb = read_ppm(r.stdout)
        out.append((os.path.basename(p), w, h, rgb))
    return out


def encode(rgb, w, h, quality, optimize, restart, progressive):
    args = ["cjpeg", "-quality", str(quality), "-sample", "2x2"]
    if optimize:
        args.append("-optimize")
    if restart:
        args += ["-restart", f"{restart}B"]
    if progressive:
        args.append("-progressive")
    ppm = b"P6\n%d %d\n255\n" % (w, h) + rgb
    return subprocess.run(args, input=ppm, capture_output=True, check=True).stdout


def crop(src, rng, min_side, max_side):
    name, W, H, rgb = src
    w = rng.randint(min(min_side, W), min(max_side, W))
    h = rng.randint(min(min_side, H), min(max_side, H))
    x, y = rng.randint(0, W - w), rng.randint(0, H - h)
    rows = [rgb[((y + r) * W + x) * 3:((y + r) * W + x + w) * 3] for r in range(h)]
    return w, h, b"".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output", required=True, help="shard path with one %%d, e.g. out/p-%%04d.tar")
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--per-shard", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-side", type=int, default=200)
    ap.add_argument("--max-side", type=int, default=900)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--first", type=int, default=0,
                    help="number of the first image: keys and shard numbers start there, so "
                         "that runs with other seeds can add to one set")
    ap.add_argument("--restart-share", type=float, default=0.0,
                    help="share of the images written with restart markers (cjpeg -restart)")
    ap.add_argument("--progressive-share", type=float, default=0.0)
    ap.add_argument("--sources", default=DEFAULT_SOURCES, help="glob of source photographs")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    sources = load_sources(a.sources, a.max_side)
    os.makedirs(os.path.dirname(os.path.abspath(a.output % a.first)), exist_ok=True)
    tf = None
    for i in range(a.first, a.first + a.images):
        if (i - a.first) % a.per_shard == 0:
            if tf:
                tf.close()
            tf = tarfile.open(a.output % (i // a.per_shard), "w", format=tarfile.GNU_FORMAT)
        src = sources[rng.randrange(len(sources))]
        w, h, rgb = crop(src, rng, a.min_side, a.max_side)
        progressive = rng.random() < a.progressive_share
        restart = rng.choice((1, 2, 4)) if not progressive and rng.random() < a.restart_share else 0
        jpg = encode(rgb, w, h, rng.randint(75, 95), rng.random() < 0.5, restart, progressive)
        key = f"{i:08d}"
        for name, data in ((key + ".jpg", jpg), (key + ".cls", str(i % a.classes).encode())):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
            tf.addfile(info, io.BytesIO(data))
    if tf:
        tf.close()


if __name__ == "__main__":
    main()
