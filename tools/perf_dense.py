"""The dense photo set's parts of tools/perf_report.py's photos section (docs/performance.md):
the set split by JPEG class with every decode path run on each class, nvJPEG called directly
on the same files (tools/nvjpeg_anchor.py: what the hardware decoders give), the engines'
utilization while a row runs (nvidia-smi dmon's jpg column), and the tables of these.

A class is what decides a file's route: baseline 4:2:0, 4:4:4, 4:2:2 and grayscale (every
GPU path takes them) and progressive (only the CPU does)."""
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import threading

CLASSES = ["4:2:0", "4:4:4", "4:2:2", "grayscale", "progressive"]
# (key, label, ringfeed-bench arguments): every path a class's images can take
CLASS_PATHS = [
    ("cpu", "CPU at full scale (`--schedule cpu --no-dct-scaling`)",
     ["--schedule", "cpu", "--no-dct-scaling"]),
    ("kernels", "the kernels (`--gpu-decode`)", ["--gpu-decode"]),
    ("engines", "the hardware decoders (`--hw-decode 100`)", ["--hw-decode", "100"]),
    ("defaults", "the defaults", []),
]
CLASS_IMAGES = 20000  # images each class run delivers, in whole epochs
# the nvjpeg_anchor.py configurations the report keeps (the rest are in the run's JSON)
ANCHOR_KEEP = ("batched 256 x1", "batched 256 x4", "batched 32 x4", "batched 256 x4 sorted",
               "batched 256 x4 prealloc", "single x7", "single x14")


class EngineMeter:
    """nvidia-smi dmon -s u in the background while a run runs: the mean of its jpg column
    (percent of time the JPEG engines were busy). None where nvidia-smi is missing."""

    def __init__(self):
        self.lines, self.p = [], None

    def __enter__(self):
        try:
            self.p = subprocess.Popen(["nvidia-smi", "dmon", "-s", "u", "-d", "1"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True)
            threading.Thread(target=lambda: self.lines.extend(self.p.stdout),
                             daemon=True).start()
        except OSError:
            self.p = None
        return self

    def __exit__(self, *exc):
        if self.p:
            self.p.terminate()
            self.p.wait()

    def jpg(self):
        head = next((l for l in self.lines if l.startswith("#") and "jpg" in l.split()), None)
        if not head:
            return None
        col = head.lstrip("#").split().index("jpg")
        vals = [int(f[col]) for f in (l.split() for l in self.lines if not l.startswith("#"))
                if len(f) > col and f[col].isdigit()]
        return statistics.mean(vals) if vals else None


def split_classes(shards, root, frame):
    """The set's samples by class, one shard per class under root (KEY.jpg + KEY.cls, Python's
    tarfile); frame(data, where) is perf_report.jpeg_frame. Returns {class: (pattern, images,
    mean kpx)} of the classes present."""
    out, px = {}, {}
    for shard in shards:
        with tarfile.open(shard) as tf:
            members = {m.name: tf.extractfile(m).read() for m in tf if m.isfile()}
        for name, data in members.items():
            if not name.endswith(".jpg"):
                continue
            w, h, sampling, progressive = frame(data, f"{shard}: {name}")
            c = "progressive" if progressive else sampling
            if c not in CLASSES:
                continue
            if c not in out:
                os.makedirs(os.path.join(root, c.replace(":", "")), exist_ok=True)
                out[c] = tarfile.open(os.path.join(root, c.replace(":", ""), "c-000000.tar"),
                                      "w", format=tarfile.GNU_FORMAT)
                px[c] = []
            px[c].append(w * h)
            key = name[:-4]
            for n, blob in ((name, data), (key + ".cls", members.get(key + ".cls", b"0"))):
                info = tarfile.TarInfo(n)
                info.size, info.mtime = len(blob), 1700000000
                out[c].addfile(info, io.BytesIO(blob))
    for tf in out.values():
        tf.close()
    return {c: (os.path.join(root, c.replace(":", ""), "c-*.tar"), len(px[c]),
                sum(px[c]) / len(px[c]) / 1e3) for c in CLASSES if c in out}


def class_runs(a, bench_path, env, classes, command):
    """Every path of CLASS_PATHS on every class: img/s and Mpix/s (images x the class's mean
    pixels). command(args, epochs) is perf_report's ringfeed-bench command line. The GPU paths
    only with the CUDA backend."""
    C = {"paths": [k for k, _, _ in CLASS_PATHS], "classes": {}}
    for c, (pattern, n, kpx) in classes.items():
        row = C["classes"][c] = {"images": n, "kpx": kpx, "runs": {}}
        epochs = max(2, -(-CLASS_IMAGES // n))
        for key, _, args in CLASS_PATHS:
            if key != "cpu" and a.device != "cuda":
                continue
            out = subprocess.run(command([pattern] + args, epochs), env=env, text=True,
                                 capture_output=True, timeout=900)
            if out.returncode:
                row["runs"][key] = {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            row["runs"][key] = {"img_per_s": r["img_per_s"],
                                "mpix_per_s": r["img_per_s"] * kpx / 1e3,
                                "hw_decoded": r.get("hw_decoded", 0),
                                "gpu_decoded": r.get("gpu_decoded", 0),
                                "samples_decoded": r.get("samples_decoded", 0)}
    return C


def anchor_run(env, shards_glob, seconds=2.0):
    """tools/nvjpeg_anchor.py on the set's baseline files: the set line and each
    configuration's result, or {"error": why}."""
    out = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__),
                                                       "nvjpeg_anchor.py"), "--shards",
                          shards_glob, "--seconds", str(seconds)], env=env, text=True,
                         capture_output=True, timeout=900)
    lines = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode or not lines:
        return {"error": (out.stderr.strip().splitlines() or ["exit status "
                                                              f"{out.returncode}"])[-1]}
    return {"set": lines[0], "runs": lines[1:]}


def classes_report(C):
    """The table of img/s (Mpix/s) by class and path."""
    labels = {k: lab for k, lab, _ in CLASS_PATHS}
    paths = [k for k in C["paths"] if any(k in r["runs"] for r in C["classes"].values())]
    L = ["### By JPEG class and decode path", "",
         "Each class's images of the set in a shard of their own, every path run alone on it "
         f"({CLASS_IMAGES:,} images or more in whole epochs, same settings as above): img/s "
         "and, in brackets, megapixels of source image per second, so that each class's "
         "route is a measured choice.", "",
         "| class | images | mean kpx | " + " | ".join(labels[k] for k in paths) + " |",
         "| --- | ---: | ---: | " + " | ".join("---:" for _ in paths) + " |"]
    for c in CLASSES:
        row = C["classes"].get(c)
        if not row:
            continue
        cells = []
        for k in paths:
            r = row["runs"].get(k)
            cells.append("-" if r is None else f"error: {r['error']}" if "error" in r else
                         f"{r['img_per_s']:,.0f} ({r['mpix_per_s']:,.0f})")
        L.append(f"| {c} | {row['images']:,} | {row['kpx']:.0f} | " + " | ".join(cells) + " |")
    return L + [""]


def anchor_report(A):
    """What nvJPEG gives when called directly on the set's baseline files."""
    L = ["### The hardware decoders called directly (nvJPEG)", ""]
    if "error" in A:
        return L + [f"Not measured: {A['error']}.", ""]
    s = A["set"]
    L += [f"`tools/nvjpeg_anchor.py` on the set's {s['files']:,} baseline files "
          f"({s['mean_kb']} KB, {s['mean_kpx']} kpx, {s['bytes_per_px']} B/px), nvJPEG's "
          f"hardware backend, {s['engines']} engines x {s['cores_per_engine']} cores, planar "
          "output in GPU memory, the files in pinned memory, no crop or resize: the engines' "
          "rate with nothing else running.", "",
          "| configuration | img/s | Mpix/s | host time per call | engines busy |",
          "| --- | ---: | ---: | ---: | ---: |"]
    for r in A["runs"]:
        if r["config"] not in ANCHOR_KEEP and not r["config"].startswith("class"):
            continue
        if "error" in r:
            L.append(f"| {r['config']} | error: {r['error']} | | | |")
            continue
        util = "-" if r.get("jpg_util") is None else f"{r['jpg_util']:.0f}%"
        call = "-" if r.get("call_ms") is None else f"{r['call_ms']:.2f} ms"
        L.append(f"| {r['config']} | {r['img_per_s']:,} | {r['mpix_per_s']:,} | {call} | "
                 f"{util} |")
    return L + ["", "batched W xT: nvjpegDecodeBatched of W images per call from T threads "
                "(a decode state and stream each); sorted: each call's images of one chroma "
                "subsampling; prealloc: nvjpegDecodeBatchedPreAllocate first; single xT: the "
                "per-image API on T threads; class: batched 64 x4 on one subsampling.", ""]

