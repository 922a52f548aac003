#!/usr/bin/env python3
"""photos.py — test sets of real photographs in WebDataset shards, written by Python's tarfile.

The generator (ringfeed-gen) makes synthetic images whose sides are ImageNet-like and whose
encoder is always libjpeg at quality 90; a property checked only on them is not known to hold
for users' data. This script cuts crops of every size (almost never multiples of 8 or 16, at
any offset) out of real photographs (by default the photos of Debian's mate-backgrounds
package, /usr/share/backgrounds/mate/nature). Shards are written with Python's tarfile (GNU
format), KEY.jpg + KEY.cls. Everything is a function of --seed: the same command writes the
same bytes.

--profile smooth (the default): sides drawn uniformly from --min-side to --max-side (200-900),
each crop encoded by cjpeg at a quality drawn from 75..95, 4:2:0, with or without optimized
Huffman tables, some with restart markers (--restart-share) or progressive
(--progressive-share). Wallpapers are smooth: such a set runs at about 0.1 bytes per pixel.

--profile dense: what users' photographs look like to a decoder (ImageNet runs about 0.5 bytes
per pixel). Long sides log-uniform from --min-side to --max-side (120-1400) at a camera's or a
phone's aspect ratio, the crop taken from a region up to 2.5 times larger and resized, then
camera-like sensor noise (signal-dependent luminance noise and weaker chroma noise) at the
strength that brings each image to its own density at quality 90, drawn log-uniform from 0.45
to 1.1 bytes per pixel (about 0.44 over the whole set at the drawn qualities); the class mix: 78% 4:2:0, 12% 4:4:4, 8% 4:2:2, 2% grayscale, 8% of every
kind progressive; quality 70..96; half of the baseline files with optimized Huffman tables;
three encoders: cjpeg (libjpeg-turbo-progs), Pillow with libjpeg's tables, and Pillow with
Photoshop's quantization tables (its JpegPresets). Needs numpy and Pillow.

    datasets/photos.py --output 'out/photos-%04d.tar' --images 512 --per-shard 128
    datasets/photos.py --profile dense --output 'out/dense-%04d.tar' --images 512

needs: apt-get install mate-backgrounds libjpeg-turbo-progs (tools/deps.sh installs both, and
numpy and Pillow).

--targets adds what segmentation and detection sets carry beside each image: KEY.seg.png, an
8-bit gray mask of --classes regions (the image's luminance blurred with a radius of 1% of
its longer side and cut into equal bands: regions with a photograph's contours, compressed
as PNG like a real label map) and KEY.json, {"boxes": [[x1, y1, x2, y2], ...], "classes":
[...]}: each region's connected pieces of at least 0.5% of the image (the largest 16) as
boxes of their class.
"""
import argparse
import glob
import io
import json
import math
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


# -- the dense profile ---------------------------------------------------------------------
DENSE_SAMPLING = (("4:2:0", 0.78), ("4:4:4", 0.12), ("4:2:2", 0.08), ("gray", 0.02))
DENSE_PROGRESSIVE = 0.08
DENSE_ASPECTS = (1.0, 4 / 3, 4 / 3, 3 / 2, 3 / 2, 16 / 9, 5 / 4)  # long side over short
DENSE_BPP = (0.45, 1.1)  # each image's bytes per pixel at quality 90, drawn log-uniform
DENSE_SIGMA_MAX = 24.0  # the noise's deviation at most, in 8-bit levels (mid-grey)
DENSE_REGION = 2.5  # the crop's region is up to this many times the image's sides
# cjpeg 50%, Pillow with libjpeg's tables 30%, Pillow with Photoshop's 20%
DENSE_ENCODERS = (("cjpeg", 0.5), ("pillow", 0.3), ("pillow-photoshop", 0.2))
# Pillow's presets (Photoshop's "Save for Web" and "Save As" tables) from coarse to fine,
# picked by the drawn quality
PHOTOSHOP = ("web_medium", "medium", "web_high", "high", "web_very_high", "maximum",
             "web_maximum")
CJPEG_SAMPLE = {"4:2:0": "2x2", "4:2:2": "2x1", "4:4:4": "1x1"}
PIL_SUBSAMPLING = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}


def pick(rng, shares):
    u, acc = rng.random(), 0.0
    for name, share in shares:
        acc += share
        if u < acc:
            return name
    return shares[-1][0]


def load_images(pattern, max_side):
    """Every source photo as a Pillow RGB image, halved while its long side exceeds
    DENSE_REGION * max_side (no crop's region is larger)."""
    from PIL import Image
    paths = sorted(glob.glob(pattern))
    if not paths:
        sys.exit(f"photos.py: no photographs match {pattern} "
                 "(apt-get install mate-backgrounds, or pass --sources)")
    out = []
    for p in paths:
        im = Image.open(p).convert("RGB")
        while max(im.size) > DENSE_REGION * max_side * 2:
            im = im.reduce(2)
        out.append(im)
    return out


def dense_size(rng, min_side, max_side):
    """(width, height): the long side log-uniform, the short one at a common aspect ratio,
    a quarter of them portrait."""
    long = math.exp(rng.uniform(math.log(min_side), math.log(max_side)))
    short = max(min_side, long / rng.choice(DENSE_ASPECTS))
    w, h = round(long), round(short)
    return (h, w) if rng.random() < 0.25 else (w, h)


def dense_crop(src, rng, w, h):
    """A w x h view of a region of src up to DENSE_REGION times larger (finer detail per
    pixel), at a random offset, resized with Lanczos."""
    from PIL import Image
    W, H = src.size
    f = min(rng.uniform(1.0, DENSE_REGION), W / w, H / h)
    rw, rh = max(1, round(w * f)), max(1, round(h * f))
    x, y = rng.randint(0, W - rw), rng.randint(0, H - rh)
    return src.crop((x, y, x + rw, y + rh)).resize((w, h), Image.LANCZOS)


class Noise:
    """Camera-like sensor noise for one image: luminance noise whose deviation grows with the
    signal (shot noise over a read-noise floor) and weaker independent noise per channel
    (chroma noise), drawn once; at(sigma) applies it at a strength."""

    def __init__(self, im, gen):
        import numpy as np
        self.np = np
        self.a = np.asarray(im, dtype=np.float32)
        h, w, _ = self.a.shape
        y = self.a @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
        self.lum = gen.standard_normal((h, w), dtype=np.float32) * np.sqrt(0.3 + y / 255)
        self.chroma = gen.standard_normal((h, w, 3), dtype=np.float32) * np.float32(0.35)

    def at(self, sigma):
        from PIL import Image
        np = self.np
        out = self.a + np.float32(sigma) * (self.lum[..., None] + self.chroma)
        return Image.fromarray(np.clip(out + 0.5, 0, 255).astype(np.uint8))


def dense_encode(im, encoder, sampling, quality, optimize, progressive):
    """The JPEG of im by one of DENSE_ENCODERS."""
    if sampling == "gray":
        im = im.convert("L")
    if encoder == "cjpeg":
        w, h = im.size
        magic = b"P5" if sampling == "gray" else b"P6"
        args = ["cjpeg", "-quality", str(quality)]
        args += ["-grayscale"] if sampling == "gray" else ["-sample", CJPEG_SAMPLE[sampling]]
        if optimize:
            args.append("-optimize")
        if progressive:
            args.append("-progressive")
        pnm = magic + b"\n%d %d\n255\n" % (w, h) + im.tobytes()
        return subprocess.run(args, input=pnm, capture_output=True, check=True).stdout
    from PIL import JpegPresets
    kw = {"optimize": optimize, "progressive": progressive}
    if sampling != "gray":
        kw["subsampling"] = PIL_SUBSAMPLING[sampling]
    if encoder == "pillow-photoshop":
        preset = PHOTOSHOP[min(len(PHOTOSHOP) - 1, (quality - 70) * len(PHOTOSHOP) // 27)]
        tables = JpegPresets.presets[preset]["quantization"]
        kw["qtables"] = tables[:1] if sampling == "gray" else tables
    else:
        kw["quality"] = quality
    buf = io.BytesIO()
    im.save(buf, "JPEG", **kw)
    return buf.getvalue()


def dense_image(src, rng, gen, a):
    """One image of the dense profile: the crop, its class, and the noise strength at which
    Pillow at quality 90 with the image's other settings meets the image's target density (up
    to four trial encodes; the smoothest sources stop at DENSE_SIGMA_MAX below it); the file is
    then encoded at the image's own quality, so that as in users' data the lower qualities are
    the lighter files."""
    w, h = dense_size(rng, a.min_side, a.max_side)
    im = dense_crop(src, rng, w, h)
    sampling, progressive = pick(rng, DENSE_SAMPLING), rng.random() < DENSE_PROGRESSIVE
    quality, optimize = rng.randint(70, 96), rng.random() < 0.5
    encoder = pick(rng, DENSE_ENCODERS)
    target = math.exp(rng.uniform(*(math.log(b) for b in DENSE_BPP)))
    noise, sigma = Noise(im, gen), 8.0
    for _ in range(4):
        bpp = len(dense_encode(noise.at(sigma), "pillow", sampling, 90, optimize,
                               progressive)) / (w * h)
        if abs(bpp / target - 1) < 0.08 or (sigma == DENSE_SIGMA_MAX and bpp < target):
            break
        # bytes grow with about the 0.6th power of the noise's deviation here
        sigma = min(DENSE_SIGMA_MAX, max(1.0, sigma * (target / bpp) ** 1.7))
    return dense_encode(noise.at(sigma), encoder, sampling, quality, optimize, progressive)


def targets(jpg, classes):
    """KEY.seg.png and KEY.json (--targets) of one encoded image."""
    import numpy as np
    from PIL import Image, ImageFilter
    im = Image.open(io.BytesIO(jpg)).convert("L")
    w, h = im.size
    lum = np.asarray(im.filter(ImageFilter.GaussianBlur(max(1.0, max(w, h) / 100))), np.int32)
    mask = np.minimum(lum * classes // 256, classes - 1).astype(np.uint8)
    png = io.BytesIO()
    Image.fromarray(mask).save(png, "PNG")
    pieces = []
    for c in range(classes):
        sel = mask == c
        if sel.sum() < 0.005 * w * h:
            continue
        # connected pieces of the class along rows: runs of rows with pixels of it
        rows = np.flatnonzero(sel.any(axis=1))
        for run in np.split(rows, np.flatnonzero(np.diff(rows) > 1) + 1):
            part = sel[run[0]:run[-1] + 1]
            cols = np.flatnonzero(part.any(axis=0))
            if part.sum() >= 0.005 * w * h:
                pieces.append((int(part.sum()), [int(cols[0]), int(run[0]), int(cols[-1]) + 1,
                                                 int(run[-1]) + 1], c))
    pieces = sorted(pieces, key=lambda p: -p[0])[:16]
    ann = {"boxes": [p[1] for p in pieces], "classes": [p[2] for p in pieces]}
    return png.getvalue(), json.dumps(ann).encode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output", required=True, help="shard path with one %%d, e.g. out/p-%%04d.tar")
    ap.add_argument("--profile", choices=("smooth", "dense"), default="smooth",
                    help="smooth: wallpaper crops as they are; dense: with camera-like noise to "
                         "users' density, mixed subsampling and encoders (see above)")
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--per-shard", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-side", type=int, help="default 200 (smooth), 120 (dense)")
    ap.add_argument("--max-side", type=int, help="default 900 (smooth), 1400 (dense)")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--first", type=int, default=0,
                    help="number of the first image: keys and shard numbers start there, so "
                         "that runs with other seeds can add to one set")
    ap.add_argument("--restart-share", type=float, default=0.0,
                    help="smooth: share of the images written with restart markers (cjpeg "
                         "-restart)")
    ap.add_argument("--progressive-share", type=float, default=0.0,
                    help=f"smooth only; the dense profile's is {DENSE_PROGRESSIVE}")
    ap.add_argument("--sources", default=DEFAULT_SOURCES, help="glob of source photographs")
    ap.add_argument("--targets", action="store_true",
                    help="also KEY.seg.png masks and KEY.json boxes (see above)")
    a = ap.parse_args()
    dense = a.profile == "dense"
    a.min_side = a.min_side or (120 if dense else 200)
    a.max_side = a.max_side or (1400 if dense else 900)
    if dense and (a.restart_share or a.progressive_share):
        ap.error("--restart-share and --progressive-share are the smooth profile's")
    rng = random.Random(a.seed)
    sources = load_images(a.sources, a.max_side) if dense else load_sources(a.sources,
                                                                             a.max_side)
    os.makedirs(os.path.dirname(os.path.abspath(a.output % a.first)), exist_ok=True)
    tf = None
    for i in range(a.first, a.first + a.images):
        if (i - a.first) % a.per_shard == 0:
            if tf:
                tf.close()
            tf = tarfile.open(a.output % (i // a.per_shard), "w", format=tarfile.GNU_FORMAT)
        src = sources[rng.randrange(len(sources))]
        if dense:
            import numpy as np
            jpg = dense_image(src, rng, np.random.default_rng([a.seed, i]), a)
        else:
            w, h, rgb = crop(src, rng, a.min_side, a.max_side)
            progressive = rng.random() < a.progressive_share
            restart = (rng.choice((1, 2, 4))
                       if not progressive and rng.random() < a.restart_share else 0)
            jpg = encode(rgb, w, h, rng.randint(75, 95), rng.random() < 0.5, restart,
                         progressive)
        key = f"{i:08d}"
        members = [(key + ".jpg", jpg), (key + ".cls", str(i % a.classes).encode())]
        if a.targets:
            png, ann = targets(jpg, a.classes)
            members += [(key + ".seg.png", png), (key + ".json", ann)]
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
            tf.addfile(info, io.BytesIO(data))
    if tf:
        tf.close()


if __name__ == "__main__":
    main()
