#!/usr/bin/env python3
"""One command on the GPU machine: every figure of docs/performance.md, side by side.

  python3 tools/perf_report.py --build build-gpu --anchors .anchors --out $OUT [--images 20000]

Generates ImageNet-like shards with ringfeed-gen, makes them page-cache resident, then runs in
one process tree, on the same shards:
  * ringfeed-bench to GPU memory vs the PyTorch DataLoader anchor (PIL and torchvision.io),
  * the decode-thread scaling curve and the per-stage breakdown,
  * ResNet-18 training (bf16, channels_last) fed by ringfeed, by the DataLoader, and from a
    batch already on the GPU (the GPU-bound rate),
  * token windows (64 x 1024 uint16 widened to int64 on the GPU) vs the nanoGPT loop, and the
    raw path's GB/s,
  * resume time at the start and at 90% of a 1 M-sample epoch,
  * global vs shard order from the page cache and from an evicted (cold) cache,
and, on sets of its own, the photos section: --photo-images crops of real photographs
(datasets/photos.py, each profile of --photo-profiles: dense, as users' files look to a
decoder, and smooth) in plain shards and as a class-folder tree, where ringfeed (defaults,
--schedule cpu, --gpu-decode, --hw-decode 100, --hw-decode 30 --gpu-decode) runs beside NVIDIA
DALI (mixed with hw_decoder_load 0.65 over the webdataset and file readers, 1.0, 0, cpu) and
the DataLoader (PIL, over the tree), the JPEG engines' utilization recorded beside each GPU
row, in --photo-rounds interleaved rounds; on the dense set also every decode path on each
JPEG class and nvJPEG called directly on its baseline files (tools/perf_dense.py,
tools/nvjpeg_anchor.py); and the first batch after create on
every path ringfeed may take (PHOTO_FIRST: one epoch each, --photo-first-rounds interleaved
rounds, against the 50 ms target); then the models of --archs train
from the same shards (GPU-bound, the example's defaults, --schedule cpu, the library's
defaults) in --photo-train-rounds interleaved rounds. A tool that cannot be imported is a
note in the report, never a figure. It writes performance.md, results.json and PNG plots into
--out. Each run's JSON is kept too (of the photos section's runs: img/s, first batch and where
ringfeed decoded). Needs: torch, torchvision, matplotlib (present on the GPU machine); for the
photos section cjpeg and djpeg on PATH, the photographs (--photo-sources) and DALI
(--dali-path).

The photos section alone, merged into the stored results, in three calls of the GPU machine
(the loading rows took 147 s with 10,240 images and one round, before the first-batch runs
were added: 30 more runs of one epoch by default; ResNet-18's three rounds 254 s,
ResNet-50's two 308 s), with build-gpu, .anchors and scratch/photo-tools carried (made here:
mkdir -p scratch/photo-tools && cp /usr/bin/cjpeg /usr/bin/djpeg
/usr/share/backgrounds/mate/nature/*.jpg scratch/photo-tools/; their libjpeg is build-gpu/lib's)
and DALI installed by ../shared/anchors/dali_fetch.sh's install.sh, DALI_SITE being the folder
it names (its PYTHONPATH). --data outside the checkout keeps the set between calls while the
machine stays warm (set.json names what made it), and each call merges the results.json of the
one before:

  export PATH=$PWD/scratch/photo-tools:$PATH RINGFEED_NVJPEG=$PWD/build-gpu/lib/libnvjpeg.so.13
  S=side,restart,scaling,train,tokens,order,memory,raw,reliability T=${TMPDIR:-/tmp}
  pr() { python3 tools/perf_report.py --build build-gpu --anchors .anchors --out $OUT \
           --cpus 16 --data $T/pd --photo-images 10240 \
           --photo-sources 'scratch/photo-tools/*.jpg' --dali-path "$DALI_SITE" "$@"; }
  pr --photo-rounds 1 --merge docs/performance-results.json --skip $S,photos_train
  cp $OUT/results.json $T/res.json                               # (each call's end)
  pr --archs resnet18 --merge $T/res.json --skip $S,photos_load  # cp as above
  pr --archs resnet50 --photo-train-rounds 2 --merge $T/res.json --skip $S,photos_load"""
import argparse, concurrent.futures, glob, json, os, platform, shutil, statistics, subprocess
import sys, tarfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "datasets"))
from photos import DEFAULT_SOURCES as PHOTO_SOURCES  # noqa: E402  the generator's own default
import perf_dense  # noqa: E402  tools/, this file's folder


def sh(cmd, env=None, timeout=900):
    """Run, echo the command, return stdout (stderr passes through)."""
    print("+", " ".join(cmd), flush=True)
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, timeout=timeout)
    print(f"  ({time.time() - t0:.1f} s, rc {p.returncode})", flush=True)
    if p.returncode != 0:
        print(p.stdout[-3000:])
        raise SystemExit(f"command failed: {' '.join(cmd)}")
    return p.stdout


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def window(r, key="decode_busy_s"):
    """(busy seconds, seconds) of a ringfeed-bench result: inside its timed window when it has
    the *_timed_s fields, else since create (runs measured before they existed), start-up
    included."""
    timed = key.replace("_s", "_timed_s")
    return (r[timed], r["seconds"]) if timed in r else (r[key], r["wall_s"])


def evict(paths):
    """Drop the files' pages from the page cache (clean pages: fadvise DONTNEED works)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def warm(paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def machine():
    info = {"cpus": os.cpu_count(), "kernel": platform.release()}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        info["mem_gib"] = round(int(open("/proc/meminfo").readline().split()[1]) / 2**20, 1)
        nodes = open("/sys/devices/system/node/online").read().strip()
        info["numa_nodes"] = nodes
    except OSError:
        pass
    try:
        info["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                      "--format=csv,noheader"], capture_output=True,
                                     text=True).stdout.strip()
    except OSError:
        info["gpu"] = "none"
    try:
        import torch, torchvision
        info["torch"], info["torchvision"] = torch.__version__, torchvision.__version__
    except ImportError:
        pass
    return info


# -- photos: plain JPEG shards of real photographs, ringfeed beside DALI and the DataLoader ----
PHOTO_SHARD = 128  # images per shard (photos.py's default)
PHOTO_JOB = 512  # images per photos.py process: whole shards, so every job starts a shard
PHOTO_MAX_FILE = 64 << 20  # a larger member or file is not a photo crop of photos.py's
# (key, row label, tool, arguments): the section's rows in the table's order. WDS and FOLDER
# stand for the shards' glob and the class-folder tree. ringfeed_gpu: ringfeed-bench with a
# GPU schedule, which the host backend refuses.
PHOTO_ROWS = [
    ("dali_hw65_wds", "DALI mixed, hw_decoder_load 0.65 (its default), webdataset reader",
     "dali", ["--shards", "WDS", "--device", "mixed", "--hw-load", "0.65"]),
    ("dali_hw65_folder", "DALI mixed, hw_decoder_load 0.65, file reader", "dali",
     ["--folder", "FOLDER", "--device", "mixed", "--hw-load", "0.65"]),
    ("dali_hw100_wds", "DALI mixed, hw_decoder_load 1.0 (every image it can to the hardware "
     "decoders), webdataset reader", "dali",
     ["--shards", "WDS", "--device", "mixed", "--hw-load", "1.0"]),
    ("dali_hw0_wds", "DALI mixed, hw_decoder_load 0 (no hardware decoders), webdataset reader",
     "dali", ["--shards", "WDS", "--device", "mixed", "--hw-load", "0"]),
    ("dali_cpu_wds", "DALI cpu, webdataset reader", "dali",
     ["--shards", "WDS", "--device", "cpu"]),
    ("ringfeed", "ringfeed defaults", "ringfeed", []),
    ("ringfeed_cpu", "ringfeed `--schedule cpu`", "ringfeed", ["--schedule", "cpu"]),
    ("ringfeed_manual30", "ringfeed `--hw-decode 30 --gpu-decode` (manual split)", "ringfeed_gpu",
     ["--hw-decode", "30", "--gpu-decode"]),
    ("ringfeed_gpu", "ringfeed `--gpu-decode` (the kernels)", "ringfeed_gpu", ["--gpu-decode"]),
    ("ringfeed_hw100", "ringfeed `--hw-decode 100` (the hardware decoders)", "ringfeed_gpu",
     ["--hw-decode", "100"]),
    # the defaults with the DCT-scalable crops kept on the CPU (dct_scaling ON): the candidate
    # default if it loads fast enough (docs/gpu-decode.md, "Limits and next steps")
    ("ringfeed_dct", "ringfeed `--dct-scaling-always` (the defaults, DCT-scalable crops on the "
     "CPU)", "ringfeed_gpu", ["--dct-scaling-always"]),
    ("torch_pil", "PyTorch DataLoader + PIL, file tree", "torch", ["--folder", "FOLDER"]),
]
# The rows' names in the bar plot, where the table's would leave no room for the bars.
PHOTO_PLOT = {"dali_hw65_wds": "DALI mixed 0.65, wds", "dali_hw100_wds": "DALI mixed 1.0, wds",
              "ringfeed_gpu": "ringfeed gpu", "ringfeed_hw100": "ringfeed hw 100",
              "dali_hw65_folder": "DALI mixed 0.65, files", "dali_hw0_wds": "DALI mixed 0, wds",
              "dali_cpu_wds": "DALI cpu, wds",
              "ringfeed": "ringfeed defaults", "ringfeed_cpu": "ringfeed cpu",
              "ringfeed_manual30": "ringfeed hw 30 + gpu", "ringfeed_dct": "ringfeed dct always",
              "torch_pil": "DataLoader PIL, files"}
# The first batch after create on every path ringfeed may decode these shards by (the target
# is PHOTO_FIRST_MS): (key, label, tool, ringfeed-bench arguments), one epoch per run, every
# path once per round of --photo-first-rounds, after the loading rows.
PHOTO_FIRST = [
    ("ringfeed", "defaults (the balancing scheduler on a CUDA device)", "ringfeed", []),
    ("ringfeed_skip", "defaults, `--on-error skip`", "ringfeed", ["--on-error", "skip"]),
    ("ringfeed_cpu", "`--schedule cpu`", "ringfeed", ["--schedule", "cpu"]),
    ("ringfeed_gpu", "`--gpu-decode` (the kernels)", "ringfeed_gpu", ["--gpu-decode"]),
    ("ringfeed_hw100", "`--hw-decode 100` (the hardware decoders)", "ringfeed_gpu",
     ["--hw-decode", "100"]),
    ("ringfeed_manual30", "`--hw-decode 30 --gpu-decode` (manual split)", "ringfeed_gpu",
     ["--hw-decode", "30", "--gpu-decode"]),
]
PHOTO_FIRST_MS = 50
# The photos section's training rows, on the same plain shards: (key, row label, arguments of
# python/examples/train_resnet.py). The example's defaults are docs/tuning.md's training
# setting (every CPU the process may use but one decodes, at nice 10; schedule auto, the
# balancing scheduler on a CUDA device); the library's own are every CPU at nice 10
# (decode_nice's default since 2026-12-02; at nice 0 before, the last row).
PHOTO_TRAIN_ROWS = [
    ("synthetic", "batch already on the GPU (GPU-bound)", ["--loader", "synthetic"]),
    ("ringfeed", "ringfeed, the example's defaults (schedule auto = balance; every CPU but one "
     "decodes, at nice 10)", []),
    # the loop of docs/tuning.md: next() overlaps the step instead of following its
    # synchronization, where the GPU is idle for as long as next() takes
    ("ringfeed_early", "ringfeed, the example's defaults, the next batch taken before the step's "
     "synchronization (`--fetch-early`)", ["--fetch-early"]),
    ("ringfeed_cpu", "ringfeed `--schedule cpu`, otherwise the example's defaults",
     ["--schedule", "cpu"]),
    ("ringfeed_lib", "ringfeed, the library's defaults (schedule auto = balance; every CPU "
     "decodes, at nice 10)", ["--decode-threads", "0", "--decode-nice", "10"]),
    ("ringfeed_all0", "ringfeed, every CPU decodes at nice 0 (the library's defaults until "
     "`decode_nice` defaulted to 10)", ["--decode-threads", "0", "--decode-nice", "0"]),
    # where the defaults' gap to the CPU schedule comes from (docs/gpu-decode.md, "The
    # scheduler"): the CPU schedule doing balance's full-scale decoding, and balance doing the
    # CPU schedule's DCT scaling
    ("ringfeed_cpu_full", "ringfeed `--schedule cpu --dct-scaling off` (the CPU at full scale, "
     "as balance decodes)", ["--schedule", "cpu", "--dct-scaling", "off"]),
    ("ringfeed_dct", "ringfeed `--dct-scaling always`, otherwise the example's defaults "
     "(balance; DCT-scalable crops stay on the CPU)", ["--dct-scaling", "always"]),
]
# What a ringfeed-bench run says about where its samples were decoded, kept with each run.
RF_WHERE = ("samples_decoded", "gpu_decoded", "hw_decoded", "decode_schedule",
            "sched_gpu_permille", "sched_hw_permille", "hw_engines", "hw_open_ms",
            "decode_threads")
SCHEDULES = ["auto", "cpu", "manual", "balance"]  # enum rf_decode_schedule's order


def check_photo_inputs(sources, env):
    """Stop, saying what is missing, when datasets/photos.py could not make the set: called
    before the first section too, so that a full run does not fail half way through."""
    if not glob.glob(sources):
        raise SystemExit(f"photos: no photographs match --photo-sources {sources} "
                         "(apt-get install mate-backgrounds, or give another glob)")
    for tool in ("cjpeg", "djpeg"):  # photos.py's encoder and decoder
        if not shutil.which(tool, path=env.get("PATH")):
            raise SystemExit(f"photos: no {tool} on PATH (apt-get install libjpeg-turbo-progs, "
                             "or put a folder holding cjpeg and djpeg first on PATH)")


def make_photos(root, images, sources, cpus, env, profile="smooth", targets=False):
    """root/photos-NNNNNN.tar: images photo crops in plain shards written by datasets/photos.py
    with --profile profile (Python's tarfile), in jobs of PHOTO_JOB images run cpus at a time.
    Job j starts at image j * PHOTO_JOB with seed j, so the set depends on images, sources and
    profile, not on how many processes wrote it. targets: with KEY.seg.png and KEY.json
    (photos.py --targets)."""
    check_photo_inputs(sources, env)
    # A set made by an earlier command of this machine with the same arguments and sources is
    # kept (the photos' training rows may run in a command of their own): set.json, written
    # last, names them (lists, as json.load gives them back).
    stamp = {"images": images, "shard": PHOTO_SHARD, "job": PHOTO_JOB,
             "sources": sorted([os.path.basename(p), os.path.getsize(p)]
                               for p in glob.glob(sources))}
    if profile != "smooth":
        stamp["profile"] = profile
    if targets:
        stamp["targets"] = True
    try:
        if json.load(open(os.path.join(root, "set.json"))) == stamp:
            print(f"photos: the set in {root} was made with these arguments; kept", flush=True)
            return sorted(glob.glob(os.path.join(root, "photos-*.tar")))
    except (OSError, ValueError):
        pass
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    gen = os.path.join(REPO, "datasets", "photos.py")
    jobs = [[sys.executable, gen, "--output", os.path.join(root, "photos-%06d.tar"),
             "--images", str(min(PHOTO_JOB, images - first)), "--per-shard", str(PHOTO_SHARD),
             "--first", str(first), "--seed", str(first // PHOTO_JOB), "--sources", sources]
            + (["--profile", profile] if profile != "smooth" else [])
            + (["--targets"] if targets else [])
            for first in range(0, images, PHOTO_JOB)]
    with concurrent.futures.ThreadPoolExecutor(max(1, cpus)) as ex:
        list(ex.map(lambda cmd: sh(cmd, env=env), jobs))
    json.dump(stamp, open(os.path.join(root, "set.json"), "w"))
    return sorted(glob.glob(os.path.join(root, "photos-*.tar")))


def shard_samples(shard):
    """{key: {ext: (member, bytes)}} of a tar shard's regular members."""
    samples = {}
    with tarfile.open(shard) as tf:
        for m in tf:
            if not m.isfile():
                continue
            if m.size > PHOTO_MAX_FILE:
                raise SystemExit(f"{shard}: member {m.name} at byte {m.offset} has {m.size} "
                                 f"bytes, over the {PHOTO_MAX_FILE} a photo crop may have")
            key, _, ext = m.name.partition(".")
            samples.setdefault(key, {})[ext] = (m, tf.extractfile(m).read())
    return samples


def photo_folder(shards, root):
    """The shards' images as root/CLASS/KEY.jpg, the class-folder tree that DALI's file reader
    and torchvision's ImageFolder read (CLASS: the sample's KEY.cls). Returns the files."""
    shutil.rmtree(root, ignore_errors=True)
    made = []
    for shard in shards:
        for key, s in shard_samples(shard).items():
            first = min(m.offset for m, _ in s.values())
            if "jpg" not in s or "cls" not in s:
                raise SystemExit(f"{shard}: sample {key} (member at byte {first}) has no .jpg "
                                 f"or no .cls member")
            m, cls = s["cls"]
            cls = cls.strip().decode("ascii", "replace")
            if not cls.isdigit() or len(cls) > 9:
                raise SystemExit(f"{shard}: {m.name} at byte {m.offset_data}: label {cls!r} "
                                 f"is not a class number")
            os.makedirs(os.path.join(root, cls), exist_ok=True)
            made.append(os.path.join(root, cls, os.path.basename(key) + ".jpg"))
            with open(made[-1], "wb") as f:
                f.write(s["jpg"][1])
    return made


def sampling(factors):
    """A JPEG frame's chroma subsampling named from its components' (h, v) factors."""
    if len(factors) == 1:
        return "grayscale"
    (h, v), chroma = factors[0], set(factors[1:])
    if len(chroma) == 1:
        ch, cv = chroma.pop()
        if h % ch == 0 and v % cv == 0:
            name = {(1, 1): "4:4:4", (2, 1): "4:2:2", (2, 2): "4:2:0", (1, 2): "4:4:0",
                    (4, 1): "4:1:1"}.get((h // ch, v // cv))
            if name:
                return name
    return ",".join(f"{a}x{b}" for a, b in factors)


def jpeg_frame(data, where):
    """(width, height, sampling, progressive) from a JPEG's frame header (SOFn); where names
    the file in the errors, which give the byte offset."""
    if data[:2] != b"\xff\xd8":
        raise SystemExit(f"{where}: no JPEG start of image at byte 0")
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            raise SystemExit(f"{where}: byte {pos} is not a marker (0x{data[pos]:02x})")
        m = data[pos + 1]
        if m == 0xFF:  # a fill byte before the marker
            pos += 1
            continue
        if m == 0xDA or m == 0xD9:  # scan data or the end before any frame header
            break
        n = int.from_bytes(data[pos + 2:pos + 4], "big")
        if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
            seg = data[pos + 4:pos + 2 + n]
            if n < 8 or len(seg) < 6 or len(seg) < 6 + 3 * seg[5]:
                raise SystemExit(f"{where}: frame header at byte {pos} is cut short")
            f = [(seg[7 + 3 * i] >> 4, seg[7 + 3 * i] & 15) for i in range(seg[5])]
            return (int.from_bytes(seg[3:5], "big"), int.from_bytes(seg[1:3], "big"),
                    sampling(f), m in (0xC2, 0xC6, 0xCA, 0xCE))
        if n < 2:
            raise SystemExit(f"{where}: segment at byte {pos} has length {n}")
        pos += 2 + n
    raise SystemExit(f"{where}: no frame header (SOFn) before byte {pos}")


def describe_photos(files, shards, sources):
    """The set as measured from its files: count, sizes in bytes and pixels, subsampling."""
    w, h, sizes, kinds, prog = [], [], [], {}, 0
    for p in files:
        with open(p, "rb") as f:
            data = f.read(PHOTO_MAX_FILE + 1)
        fw, fh, s, pg = jpeg_frame(data, p)
        w.append(fw), h.append(fh), sizes.append(len(data))
        kinds[s] = kinds.get(s, 0) + 1
        prog += pg
    n = len(files)
    return {"images": n, "shards": len(shards), "bytes": sum(sizes),
            "mean_bytes": sum(sizes) / n, "min_bytes": min(sizes), "max_bytes": max(sizes),
            "mean_kpx": sum(x * y for x, y in zip(w, h)) / n / 1e3,
            "width": [min(w), max(w)], "height": [min(h), max(h)],
            "sampling": kinds, "progressive": prog, "sources": sources,
            "source_files": len(glob.glob(sources))}


def importable(modules, env):
    """None when python3 imports modules under env, else the last line of why not."""
    p = subprocess.run([sys.executable, "-c", f"import {modules}"], env=env,
                       capture_output=True, text=True)
    why = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
    return None if p.returncode == 0 else why


def dali_env(env, path):
    """env for the DALI runs only: DALI installed with pip --target at path (the folder
    dali_fetch.sh's install.sh fills) first on PYTHONPATH, and the CUDA 13 libraries of its wheels first on
    LD_LIBRARY_PATH (nvImageCodec finds libnvjpeg there, not in ringfeed's build/lib)."""
    if not path:
        return env
    path = os.path.abspath(path)
    return dict(env, PYTHONPATH=path + ":" + env.get("PYTHONPATH", ""),
                LD_LIBRARY_PATH=os.path.join(path, "nvidia", "cu13", "lib") + ":"
                + env.get("LD_LIBRARY_PATH", ""))


def photo_command(tool, args, a, bench_path, epochs):
    """One row's command line: every tool with batch 256 and a.cpus threads or workers."""
    if tool == "dali":
        return [sys.executable, os.path.join(a.anchors, "dali_pipeline.py"), *args,
                "--threads", str(a.cpus), "--batch", "256"]
    if tool == "torch":
        return [sys.executable, os.path.join(a.anchors, "torch_dataloader.py"), *args,
                "--workers", str(a.cpus), "--batch", "256", "--epochs", "2"]
    return [bench_path, "--shards", args[0], *args[1:], "--json", "--device", a.device,
            "--batch", "256", "--threads", str(a.cpus), "--epochs", str(epochs),
            "--warmup", "8"]


def photo_run(tool, r):
    """What the report keeps of one run: img/s, the first batch in ms where the tool reports
    it, and for ringfeed where its samples were decoded."""
    run = {"img_per_s": r["img_per_s"]}
    if tool.startswith("ringfeed"):
        run["first_batch_ms"] = r["first_batch_ms"]
        run.update({k: r[k] for k in RF_WHERE if k in r})
    elif r.get("first_batch_s") is not None:
        run["first_batch_ms"] = r["first_batch_s"] * 1e3
    return run


def photo_rows(runs):
    """The rows measured so far, each with the medians over its rounds."""
    rows = []
    for key, label, tool, _ in PHOTO_ROWS:
        rs = runs.get(key)
        if not rs:
            continue
        fb = [r["first_batch_ms"] for r in rs if "first_batch_ms" in r]
        rows.append({"key": key, "label": label, "tool": tool,
                     "img_per_s": statistics.median(r["img_per_s"] for r in rs),
                     "first_batch_ms": statistics.median(fb) if fb else None, "runs": rs})
    return rows


def set_identity(desc):
    """What makes two photo sets the same: describe_photos' figures measured from the files,
    not the glob the photographs were found with (a checkout's scratch/photo-tools or another
    folder holding the same files)."""
    return {k: v for k, v in desc.items() if k != "sources"}


# The photo sets of the photos section: datasets/photos.py's profile -> the results' key.
PHOTO_PROFILES = {"dense": "photos_dense", "smooth": "photos"}


def photos_section(a, R, env, bench_path, save, skip, profile="smooth"):
    """The photos section on one set (profile): the set made and described, then its loading
    rows (unless photos_load is in skip) and its training rows (unless photos_train is), each
    part in rounds that run every row once, interleaved so that a drift of the machine's
    clocks spreads over all rows; the medians are saved after every round. A part not run
    keeps the stored figures, which must have been measured on the same set. The dense set
    also gets its class table and the hardware decoders' direct rate (tools/perf_dense.py)."""
    key = PHOTO_PROFILES[profile]
    root = a.data + ("-photos" if profile == "smooth" else f"-photos-{profile}")
    shards = make_photos(os.path.join(root, "shards"), a.photo_images, a.photo_sources,
                         a.cpus, env, profile)
    files = photo_folder(shards, os.path.join(root, "folder"))
    desc = describe_photos(files, shards, a.photo_sources)
    if profile != "smooth":  # (the smooth set's description stays what its figures name)
        desc["profile"] = profile
        desc["pixels"] = describe_pixels(files)
    old = R.get(key, {})
    kept = ("photos_load" in skip and old.get("rows")) or ("photos_train" in skip
                                                           and old.get("train"))
    if kept and set_identity(old.get("set", desc)) != set_identity(desc):
        raise SystemExit(f"photos: the stored figures were measured on another set ({old['set']}"
                         f"), not on this one ({desc}); run both parts")
    P = R[key] = {"set": desc, "cpus": a.cpus, "device": a.device, "rounds": 0, "rows": [],
                  "unavailable": {}}
    if "photos_load" in skip:  # the stored loading rows stand
        P.update({k: old[k] for k in ("cpus", "device", "rounds", "rows", "unavailable",
                                      "first", "classes", "anchor") if k in old})
    if "train" in old and old.get("set") == desc:  # models not measured now stay
        P["train"] = old["train"]
    warm(shards + files)
    paths = {"WDS": os.path.join(root, "shards", "photos-*.tar"),
             "FOLDER": os.path.join(root, "folder")}
    if "photos_load" not in skip:
        photos_load(a, P, env, bench_path, save, paths, len(files))
        if profile == "dense":
            photos_dense(a, P, env, bench_path, save, shards, root)
    if "photos_train" not in skip:
        photos_train(a, P, env, save, paths["WDS"])


def describe_pixels(files):
    """The set's pixels and bytes per pixel, from the frame headers."""
    px = 0
    for p in files:
        with open(p, "rb") as f:
            w, h, _, _ = jpeg_frame(f.read(PHOTO_MAX_FILE + 1), p)
        px += w * h
    return {"total": px, "bytes_per_px": sum(os.path.getsize(p) for p in files) / px}


def photos_dense(a, P, env, bench_path, save, shards, root):
    """The dense set's class table (every path on each class) and nvJPEG's direct rate on its
    baseline files (tools/perf_dense.py)."""
    classes = perf_dense.split_classes(shards, os.path.join(root, "classes"), jpeg_frame)
    P["classes"] = perf_dense.class_runs(
        a, bench_path, env, classes,
        lambda args, epochs: photo_command("ringfeed", args, a, bench_path, epochs))
    save()
    if a.device == "cuda":
        P["anchor"] = perf_dense.anchor_run(env, os.path.join(root, "shards", "photos-*.tar"))
        save()


def photos_load(a, P, env, bench_path, save, paths, images):
    """The loading rows (PHOTO_ROWS) in a.photo_rounds rounds, then the first-batch runs."""
    denv = dali_env(env, a.dali_path)
    for tool, modules, e in [("dali", "nvidia.dali", denv), ("torch", "torch, torchvision", env)]:
        why = importable(modules, e)
        if why:
            P["unavailable"][tool] = f"it could not be imported ({why})"
    if a.device != "cuda":
        P["unavailable"]["ringfeed_gpu"] = (f"`--device {a.device}` decodes on the CPU only "
                                            "(BALANCE and the GPU paths need the CUDA backend)")
    epochs = max(3, -(-a.photo_samples // images))
    runs = {}
    for _ in range(a.photo_rounds):
        for key, _, tool, args in PHOTO_ROWS:
            if tool in P["unavailable"]:
                continue
            args = [paths.get(x, x) for x in args]
            if tool.startswith("ringfeed"):
                args = [paths["WDS"]] + args
            with perf_dense.EngineMeter() as meter:
                out = sh(photo_command(tool, args, a, bench_path, epochs),
                         env=denv if tool == "dali" else env)
            run = photo_run(tool, last_json(out))
            if a.device == "cuda" and tool != "torch" and meter.jpg() is not None:
                run["jpg_util"] = meter.jpg()  # the JPEG engines' busy share while it ran
            runs.setdefault(key, []).append(run)
        P["rounds"] += 1
        P["rows"] = photo_rows(runs)
        save()
    photos_first(a, P, env, bench_path, save, paths["WDS"])


def photos_first(a, P, env, bench_path, save, pattern):
    """The first-batch runs (PHOTO_FIRST) in a.photo_first_rounds rounds: each run's first
    batch on the device after create, when rf_loader_next handed it out, the samples decoded
    by then and create's own time (ringfeed-bench --json)."""
    F = P["first"] = {"rounds": 0, "runs": {}}
    for _ in range(a.photo_first_rounds):
        for key, _, tool, args in PHOTO_FIRST:
            if tool in P["unavailable"]:
                continue
            r = last_json(sh(photo_command(tool, [pattern] + args, a, bench_path, 1), env=env))
            F["runs"].setdefault(key, []).append(
                {"first_batch_ms": r["first_batch_ms"], "next_ms": r["first_batch"]["next_ms"],
                 "decoded": r["first_batch"]["decoded"], "create_ms": r["create_ms"]})
        F["rounds"] += 1
        save()


def photos_train(a, P, env, save, pattern):
    """The training rows (PHOTO_TRAIN_ROWS): for each model of --archs, a.photo_train_rounds
    rounds of python/examples/train_resnet.py from the plain shards, each round's GPU-bound run
    beside its loaders' runs. A model measured now replaces its stored rows; the others
    stay."""
    T = P.setdefault("train", {})
    why = ("it needs the CUDA backend" if a.device != "cuda"
           else importable("torch, torchvision", env))
    if why:
        T["unavailable"] = f"not measured: {why}"
        save()
        return
    T.pop("unavailable", None)
    ex = os.path.join(REPO, "python", "examples", "train_resnet.py")
    for arch in a.archs.split(","):
        A = T[arch] = {"steps": a.photo_train_steps, "rounds": 0, "runs": {}}
        for _ in range(a.photo_train_rounds):
            for key, _, args in PHOTO_TRAIN_ROWS:
                out = sh([sys.executable, ex, "--arch", arch, "--shards", pattern, "--batch",
                          "256", "--steps", str(a.photo_train_steps), "--warmup", "20",
                          "--classes", "1000", *args], env=env)
                r = last_json(out)
                run = {"img_per_s": r["img_per_s"], "gpu_wait_fraction": r["gpu_wait_fraction"]}
                run.update(r.get("decode") or {})
                if r.get("step"):  # where each step's time went (the example's docstring)
                    run["step"] = r["step"]
                A["runs"].setdefault(key, []).append(run)
            A["rounds"] += 1
            save()


def where_decoded(row):
    """Where a ringfeed row's samples were decoded, over all its runs, and the schedule; with
    BALANCE the shares the scheduler had reached at the end of each run."""
    rs = row["runs"]
    n = sum(r.get("samples_decoded", 0) for r in rs)
    if not n:
        return "-"
    hw, gpu = (sum(r.get(k, 0) for r in rs) for k in ("hw_decoded", "gpu_decoded"))
    text = (f"hardware decoders {100 * hw / n:.0f}%, GPU kernels {100 * gpu / n:.0f}%, CPU "
            f"{100 * (n - hw - gpu) / n:.0f}%; schedule {SCHEDULES[rs[-1]['decode_schedule']]}"
            if "decode_schedule" in rs[-1] else "")
    if rs[-1].get("decode_schedule") == SCHEDULES.index("balance"):
        shares = [f"{r['sched_gpu_permille'] / 10:.1f}% (engines "
                  f"{r['sched_hw_permille'] / 10:.1f}% of it)" for r in rs]
        text += ", shares at the end GPU " + (
            f"{shares[0]} in each of the {len(rs)} runs" if len(rs) > 1 and len(set(shares)) == 1
            else ", ".join(shares))
    return text


def photos_report(P, loader_plot):
    """The "Plain JPEG photographs" section of the report: the set, notes for the tools that
    were not importable, the table with each row's ratio to DALI's best row and to ringfeed's
    defaults, and the bar plot."""
    d, rows = P["set"], P["rows"]
    dense = d.get("profile") == "dense"
    kpx = ", ".join(f"{k} ({v:,} images)" for k, v in sorted(d["sampling"].items()))
    where = ("GPU memory" if P["device"] == "cuda"
             else f"`--device {P['device']}` memory (a dry run)")
    made = (f"## Plain JPEG photographs, dense (users' density: {d['pixels']['bytes_per_px']:.2f} "
            "bytes per pixel)" if dense else "## Plain JPEG photographs", "",
            f"Data: {d['images']:,} crops of {d['source_files']} photographs (`{d['sources']}`) "
            "made by `datasets/photos.py --profile dense`: long sides log-uniform from 120 to "
            "1400 px at camera aspect ratios, camera-like sensor noise to each image's own "
            "density, 4:2:0 with about 12% 4:4:4, 8% 4:2:2 and 2% grayscale, 8% progressive, "
            "half with optimized Huffman tables, qualities 70-96, encoded by cjpeg, Pillow and "
            "Pillow with Photoshop's tables"
            if dense else
            f"Data: {d['images']:,} crops of {d['source_files']} photographs (`{d['sources']}`) cut "
            "by `datasets/photos.py` at sides drawn uniformly from 200 to 900 px (rarely multiples "
            "of 16) and encoded by cjpeg at qualities 75-95")
    L = [made[0], made[1],
         made[2] + f", in {d['shards']} plain tar shards "
         "written by Python's tarfile, and the same files as a class-folder tree "
         "(`CLASS/KEY.jpg`) for the file readers; page-cache resident. Measured from the "
         f"files: mean {d['mean_bytes'] / 1e3:.1f} KB ({d['min_bytes'] / 1e3:.1f}-"
         f"{d['max_bytes'] / 1e3:.1f} KB), mean {d['mean_kpx']:.0f} kpx, widths "
         f"{d['width'][0]}-{d['width'][1]} px, heights {d['height'][0]}-{d['height'][1]} px; "
         f"subsampling {kpx}; {d['progressive']:,} progressive"
         + (f"; {d['pixels']['bytes_per_px']:.3f} bytes per pixel." if dense else "."), "",
         f"RandomResizedCrop 224 + flip into {where}, batch 256, {P['cpus']} decode threads / "
         f"DALI threads / DataLoader workers, {P['rounds']} interleaved round(s), medians "
         "(runs: the lowest and highest of the rounds).", ""]
    for tool, name in [("dali", "DALI"), ("torch", "PyTorch DataLoader"),
                       ("ringfeed_gpu", "ringfeed's GPU-schedule")]:
        if tool in P["unavailable"]:
            L += [f"**{name} rows not measured:** {P['unavailable'][tool]}; no figure stands in "
                  "for them.", ""]
    dali = [r["img_per_s"] for r in rows if r["tool"] == "dali"]
    ref = {"dali": max(dali, default=None),
           "defaults": next((r["img_per_s"] for r in rows if r["key"] == "ringfeed"), None)}
    # the JPEG engines' busy share while each row ran, where it was measured
    util = any("jpg_util" in x for r in rows for x in r["runs"])
    L += ["| loader, settings | img/s | of DALI's best | of ringfeed defaults | first batch | "
          "runs | " + ("engines busy | " if util else "") + "where ringfeed decoded |",
          "| --- | ---: | ---: | ---: | ---: | --- | " + ("---: | " if util else "") + "--- |"]
    for r in rows:
        v, rr = r["img_per_s"], [x["img_per_s"] for x in r["runs"]]
        ratio = [f"{v / ref[k]:.2f}x" if ref[k] else "-" for k in ("dali", "defaults")]
        fb = "-" if r["first_batch_ms"] is None else f"{r['first_batch_ms']:,.0f} ms"
        busy = [x["jpg_util"] for x in r["runs"] if "jpg_util" in x]
        L.append(f"| {r['label']} | {v:,.0f} | {ratio[0]} | {ratio[1]} | {fb} | "
                 f"{min(rr):,.0f}-{max(rr):,.0f} | "
                 + (f"{statistics.median(busy):.0f}% | " if busy else "- | " if util else "")
                 + f"{where_decoded(r) if r['tool'].startswith('ringfeed') else ''} |")
    L += ["", "First batch: ringfeed's after create; DALI's from the pipeline's build through its "
          "first batch; the DataLoader's from the start of iteration (its workers' start "
          "included).", ""]
    color = {"ringfeed": "#c33", "ringfeed_gpu": "#c33", "dali": "#76b900", "torch": "#888"}
    # (a stored result's row that is no longer in PHOTO_ROWS keeps its table label)
    L += loader_plot([(PHOTO_PLOT.get(r["key"], r["label"]), r["img_per_s"]) for r in rows],
                     "photos_dense.png" if dense else "photos.png",
                     "images/s (photographs, RandomResizedCrop 224)",
                     "throughput per loader, " + ("dense " if dense else "") + "photographs",
                     [color[r["tool"]] for r in rows])
    if util:
        L += ["Engines busy: the mean of `nvidia-smi dmon -s u`'s jpg column (the GPU's JPEG "
              "decoders' busy share) over the run, the median of the rounds.", ""]
    if "classes" in P:
        L += perf_dense.classes_report(P["classes"])
    if "anchor" in P:
        L += perf_dense.anchor_report(P["anchor"])
    if "first" in P:
        L += photos_first_report(P["first"], P["unavailable"])
    return L + photos_train_report(P.get("train", {}))


def photos_first_report(F, unavailable):
    """The first-batch table: every path's runs in the order they ran, their median and
    slowest, how many came within PHOTO_FIRST_MS, and the samples decoded by the hand-out."""
    L = [f"### First batch after create, every path ({F['rounds']} interleaved round(s) of one "
         f"epoch per path; the target is {PHOTO_FIRST_MS} ms)", "",
         f"| path | median | slowest | within {PHOTO_FIRST_MS} ms | runs (ms, in order) | "
         "samples decoded by then (median) |", "| --- | ---: | ---: | ---: | --- | ---: |"]
    for key, label, tool, _ in PHOTO_FIRST:
        rs = F["runs"].get(key)
        if not rs:
            continue
        ms = [r["first_batch_ms"] for r in rs]
        L.append(f"| {label} | {statistics.median(ms):.1f} ms | {max(ms):.1f} ms | "
                 f"{sum(m <= PHOTO_FIRST_MS for m in ms)} of {len(ms)} | "
                 f"{', '.join(f'{m:.1f}' for m in ms)} | "
                 f"{statistics.median(r['decoded'] for r in rs):,.0f} |")
    L += ["", "The batch on the device (`rf_batch_synchronize` returned), after "
          "`rf_loader_create` returned: `ringfeed-bench --json`'s `first_batch_ms`; the "
          "samples decoded by then are `first_batch.decoded` (a batch is 256)."
          + (f" The GPU paths were not measured: {unavailable['ringfeed_gpu']}."
             if "ringfeed_gpu" in unavailable else ""), ""]
    return L


def photos_train_report(T):
    """The photos section's training tables: each row's median img/s over the rounds and its
    ratio to the GPU-bound median, each round's own ratio (the loader's run over the GPU-bound
    run of the same round), the GPU's wait for data, the step's parts (medians of the runs'
    per-step means; runs stored before the example measured them show "-"), and where
    ringfeed decoded."""
    if "unavailable" in T:
        return [f"**Training on these shards {T['unavailable']}**; no figure stands in for it.",
                ""]
    L = []
    med = statistics.median
    for arch, A in T.items():
        runs = A["runs"]
        if "synthetic" not in runs:
            continue
        gb = [r["img_per_s"] for r in runs["synthetic"]]
        L += [f"### {arch} training from these shards (bf16, channels_last, batch 256, "
              f"{A['steps']} steps after 20 of warm-up, python/examples/train_resnet.py; "
              f"{A['rounds']} interleaved round(s), medians)", "",
              "| input | img/s | of GPU-bound | each round | GPU waited for data | `next()` per "
              "step | step on the GPU, mean / p90 | launching a step | process CPU per step | "
              "decode threads | where ringfeed decoded |",
              "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for key, label, _ in PHOTO_TRAIN_ROWS:
            rs = runs.get(key)
            if not rs:
                continue
            v = med(r["img_per_s"] for r in rs)
            each = "" if key == "synthetic" else ", ".join(
                f"{100 * r['img_per_s'] / g:.1f}%" for r, g in zip(rs, gb))
            threads = {r["decode_threads"] for r in rs if "decode_threads" in r}
            st = [r["step"] for r in rs if "step" in r]
            part = (lambda k: med(x[k] for x in st)) if len(st) == len(rs) else None
            parts = (f"{1e3 * part('next_ms'):.0f} us | "
                     f"{part('gpu_span_ms'):.2f} / {part('gpu_span_p90_ms'):.2f} ms | "
                     f"{part('launch_ms'):.2f} ms | {part('process_cpu_ms'):.0f} ms"
                     if part else "- | - | - | -")
            L.append(f"| {label} | {v:,.0f} | {100 * v / med(gb):.1f}% | {each} | "
                     f"{100 * med(r['gpu_wait_fraction'] for r in rs):.1f}% | {parts} | "
                     f"{', '.join(map(str, sorted(threads))) or '-'} | "
                     f"{where_decoded({'runs': rs}) if key != 'synthetic' else ''} |")
        L.append("")
    if any("step" in r for A in T.values() for rs in A["runs"].values() for r in rs):
        L += ["`next()` per step: the training thread's time taking the next batch (with "
              "`--fetch-early` while the step runs on the GPU, otherwise after its "
              "synchronization, with the GPU idle, so with `--fetch-early` the GPU's wait for "
              "data is at most what it says); step on the GPU: from before the step's first "
              "kernel to after its last on the GPU's own clock (CUDA events), including the "
              "gaps in which the GPU waited for the training thread to launch the next kernel; "
              "launching a step: that thread enqueuing the forward and backward passes and the "
              "optimizer step; process CPU: the user and system time of the whole process, the "
              "loader's threads included (medians of each run's per-step means).", ""]
    return L


SECTIONS = ["side", "restart", "photos", "scaling", "train", "tokens", "order", "memory", "raw",
            "reliability", "multicrop", "targets"]


def parse_args():
    """The command line, checked: the parser (for later errors), the arguments and the set of
    sections to skip."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build-gpu")
    ap.add_argument("--anchors", default=".anchors")
    ap.add_argument("--out", default=os.environ.get("OUT", "perf-out"))
    ap.add_argument("--images", type=int, default=20000)
    ap.add_argument("--data", default=os.path.join(REPO, "scratch", "perf-data"),
                    help="where the generated shards go (and DATA-restart, DATA-corrupt beside "
                         "it); default scratch/perf-data in the checkout, git-ignored")
    ap.add_argument("--skip", default="", help="comma list of sections to skip (scaling_cpu: "
                    "the scaling section without its two CPU-decode curves; photos_load, "
                    "photos_train: the photos section without its loading or its training "
                    "rows)")
    ap.add_argument("--device", default="cuda", help="host: a dry run of the script here")
    ap.add_argument("--merge", help="results.json of an earlier run: sections not run now are "
                    "taken from it, so one section can be re-measured")
    ap.add_argument("--train-steps", type=int, default=200)
    ap.add_argument("--archs", default="resnet18,resnet50", help="models the train section and "
                    "the photos section's training rows run (a merged run keeps the others' "
                    "stored figures)")
    ap.add_argument("--soak-epochs", type=int, default=40)
    ap.add_argument("--scaling-rounds", type=int, default=5,
                    help="interleaved rounds of the scaling section (medians over them)")
    ap.add_argument("--cpus", type=int, default=os.cpu_count(),
                    help="decode threads / DataLoader workers for the one-GPU runs")
    ap.add_argument("--target-images", type=int, default=2048,
                    help="dense photo crops with masks and boxes of the targets section")
    ap.add_argument("--photo-images", type=int, default=25600,
                    help="photo crops of the photos section")
    ap.add_argument("--photo-sources", default=PHOTO_SOURCES,
                    help="glob of the photographs the photos section's crops are cut from")
    ap.add_argument("--photo-profiles", default="dense,smooth",
                    help="the photos section's sets, datasets/photos.py's profiles: dense (camera "
                         "noise to ImageNet's density, mixed classes and encoders) and smooth "
                         "(the wallpapers' crops as they are)")
    ap.add_argument("--photo-train-rounds", type=int, default=3,
                    help="interleaved rounds of the photos section's training rows, each with "
                         "its own GPU-bound run")
    ap.add_argument("--photo-train-steps", type=int, default=400,
                    help="measured steps of each training run of the photos section (after 20 "
                         "of warm-up): ResNet-18 takes 8 s of them on the H200")
    ap.add_argument("--photo-first-rounds", type=int, default=5,
                    help="interleaved rounds of the photos section's first-batch runs (one "
                         "epoch of every path in PHOTO_FIRST each)")
    ap.add_argument("--photo-rounds", type=int, default=2,
                    help="interleaved rounds of the photos section (medians over them)")
    ap.add_argument("--photo-samples", type=int, default=409600,
                    help="images each ringfeed run of the photos section delivers, in whole "
                         "epochs (at least 3): about as many as DALI's 12 s timed window gives "
                         "at its best rate on the H200 (33k img/s), which follows its build "
                         "(the engines' open) and 10 batches, where ringfeed's timed run starts "
                         "8 batches after create (the scheduler's engines open and its shares "
                         "settle inside it)")
    ap.add_argument("--dali-path", help="folder DALI was installed in with pip --target "
                    "(the one dali_fetch.sh's install.sh names): put on PYTHONPATH, and its "
                    "nvidia/cu13/lib on LD_LIBRARY_PATH, for the DALI runs only")
    a = ap.parse_args()
    for name in ("photo_images", "photo_rounds", "photo_samples", "photo_train_rounds",
                 "photo_train_steps", "photo_first_rounds"):
        # The folder tree and the description hold every photo: a bound, not only a floor.
        if not 1 <= getattr(a, name) <= 1_000_000:
            ap.error(f"--{name.replace('_', '-')} must be 1 to 1,000,000, not {getattr(a, name)}")
    skip = set(filter(None, a.skip.split(",")))
    unknown = skip - set(SECTIONS) - {"scaling_cpu", "photos_load", "photos_train"}
    if unknown:  # a misspelt name would run a section that takes minutes
        ap.error(f"--skip: no section {', '.join(sorted(unknown))} (sections: "
                 f"{', '.join(SECTIONS)}; parts: scaling_cpu, photos_load, photos_train)")
    if {"photos_load", "photos_train"} <= skip:
        skip.add("photos")
    return ap, a, skip


def child_env(build):
    """The environment of every command run: the build's libraries and the binding first."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.join(os.path.abspath(build), "lib") + ":" + env.get(
        "LD_LIBRARY_PATH", "")
    env["RINGFEED_LIB"] = os.path.join(os.path.abspath(build), "libringfeed.so")
    env["PYTHONPATH"] = os.path.join(REPO, "python") + ":" + env.get("PYTHONPATH", "")
    return env


def merge_notes(R, ran):
    """A merged run (--merge) that measures the sections `ran` now: the notes of the stored
    results that those sections make wrong go."""
    if "machine_rerun" in R:  # results written before per-section machines existed
        R.setdefault("machines", {})["train"] = R.pop("machine_rerun")
    # Sections measured now leave the notes of the machine they were measured on before;
    # the rest of such a note stays (a note for restart,scaling,train becomes one for
    # restart,scaling when only train is re-measured), and the DDP figures keep theirs
    # unless this machine re-measures them (two GPUs).
    ms = R.setdefault("machines", {})
    for k in list(ms):
        if set(k.split(",")) & set(ran.split(",")):
            old = ms.pop(k)
            rest = [x for x in k.split(",") if x not in ran.split(",")]
            if rest:
                ms[",".join(rest)] = old
            if "train" in k.split(",") and "ddp" in R and "ddp" not in ms:
                ms["ddp"] = old
    # A note on figures that a later code change made stale (results.json "stale",
    # section -> text) goes when its section is measured again.
    for k in ran.split(","):
        R.get("stale", {}).pop(k, None)
    if not R.get("stale"):
        R.pop("stale", None)


class Run:
    """What the sections of one command share: the arguments, the sections skipped, the
    environment, the results (R, saved after every section) and the generated shards (the
    plain set's pattern `pat`, the restart-marked copy's `rst_pat`)."""

    def __init__(self, a, skip, env, R):
        self.a, self.skip, self.env, self.R = a, skip, env, R
        self.B = os.path.join(a.build, "tools", "ringfeed-bench")
        self.gen = os.path.join(a.build, "datasets", "ringfeed-gen")
        self.ncpu = a.cpus
        self.shards = []
        self.pat = os.path.join(a.data, "train-*.tar")
        self.rst_dir = a.data + "-restart"
        self.rst_pat = os.path.join(self.rst_dir, "train-*.tar")

    def generate(self, dirpath, *extra):
        """The same seed-0 images every call; returns the shards (made page-cache resident)
        and the generator's seconds."""
        a = self.a
        shutil.rmtree(dirpath, ignore_errors=True)
        os.makedirs(dirpath)
        t0 = time.time()
        sh([self.gen, "--output", os.path.join(dirpath, "train-%06d.tar"), "--images",
            str(a.images), "--per-shard", str((a.images + 63) // 64), "--seed", "0", "--quiet",
            *extra])
        secs = time.time() - t0
        made = sorted(glob.glob(os.path.join(dirpath, "train-*.tar")))
        warm(made)
        return made, secs

    def bench(self, *args, pattern=None):
        """One ringfeed-bench run (on the plain shards unless `pattern` says). The sections
        other than the photos measure the CPU decode path their rows name unless a run asks
        for a GPU path: on the CUDA device the defaults are the balancing scheduler, so the CPU
        schedule is asked for."""
        pattern = self.pat if pattern is None else pattern
        gpu = {"--gpu-decode", "--hw-decode", "--schedule"} & set(args)
        cpu = [] if gpu else ["--schedule", "cpu"]
        return last_json(sh([self.B, "--shards", pattern, "--json", *cpu, *args], env=self.env))

    def save(self):  # after every section, so a run cut short still leaves its figures
        json.dump(self.R, open(os.path.join(self.a.out, "results.json"), "w"), indent=1)

    def side_by_side(self, pattern, gpu=False):
        """ringfeed and both DataLoader decoders on the same shards; gpu: ringfeed with GPU
        decode too (restart-marked shards)."""
        a, env = self.a, self.env
        anchor = os.path.join(a.anchors, "torch_dataloader.py")
        loader = [sys.executable, anchor, "--shards", pattern, "--workers", str(self.ncpu),
                  "--epochs", "2"]
        run = ("--device", a.device, "--batch", "256", "--epochs", "3", "--warmup", "8")
        S = {"ringfeed": self.bench(*run, pattern=pattern)}
        if gpu:
            S["ringfeed_gpu"] = self.bench(*run, "--gpu-decode", pattern=pattern)
        S["anchor_pil"] = last_json(sh(loader, env=env))
        S["anchor_tv"] = last_json(sh(loader + ["--decoder", "torchvision"], env=env))
        return S


def section_data(run):
    """The ImageNet-like shards every section but the photos reads, and the report's dataset
    line."""
    a, R, skip = run.a, run.R, run.skip
    # The photos section makes its own set: a merged run of it alone generates no
    # ImageNet-like shards (time the GPU machine's 10-minute call needs) and keeps their line.
    if set(SECTIONS) - skip - {"photos"} or "dataset" not in R:
        run.shards, gen_s = run.generate(a.data)
        total = sum(os.path.getsize(p) for p in run.shards)
    # The dataset line opens the report beside the side-by-side run's machine: a merged run
    # that does not re-measure that section keeps the line it was measured with.
    if not (a.merge and "side" in skip and "dataset" in R):
        R["dataset"] = {"images": a.images, "shards": len(run.shards), "bytes": total,
                        "generator_s": gen_s, "generator_mb_s": total / gen_s / 1e6,
                        "mean_jpeg_kb": total / a.images / 1e3}


def section_restart(run):
    """The same images with restart markers (ringfeed-gen --restart = ringfeed-pack
    --restart's rewrite: identical pixels, ~1% larger files), every loader side by side
    again."""
    a, skip = run.a, run.skip
    if "restart" not in skip or "train" not in skip or "scaling" not in skip:
        rshards, _ = run.generate(run.rst_dir, "--restart")  # training and scaling read it too
    if "restart" not in skip:
        run.R["restart"] = {"bytes": sum(os.path.getsize(p) for p in rshards),
                            **run.side_by_side(run.rst_pat, gpu=a.device == "cuda")}


# A speed-up is a ratio of two runs, and on a shared host one run's clocks can differ from the
# next one's by several percent (seen here: one thread of a pure integer loop ran 8% faster in
# one call than in the next). So every thread count is measured in several rounds
# (--scaling-rounds), interleaved (every thread count once, then again), and the medians are
# compared; each run takes about two seconds whatever its thread count. A round runs 1 and 16
# threads first, back to back, so that its own 16/1 ratio sees the least drift (the report
# gives those too). The figures are saved after every round, so a run cut short keeps the
# rounds it finished. Three curves per round:
#  - the pipeline: ringfeed-bench over 10 shards (3,130 images), one epoch per thread, images
#    decoded inside the timed window (decode_img_per_s: the batches prefetched before the
#    window opened are left out);
#  - decoders alone: ringfeed-decode-bench --threads N, N decoders sharing a work counter over
#    one shard's images and nothing else;
#  - the cores alone: ringfeed-decode-bench --threads N --spin, a fixed integer loop that
#    touches no memory: what all-core clocks leave of linear scaling for any CPU-bound work.
def section_scaling(run):
    """The decode-thread scaling curves (the comment above), then GPU decode's."""
    a, R, env, skip, ncpu = run.a, run.R, run.env, run.skip, run.ncpu
    db = os.path.join(a.build, "tools", "ringfeed-decode-bench")
    rounds = 0 if "scaling_cpu" in skip else a.scaling_rounds
    counts = sorted({1, 2, 4, 8, 12, ncpu})
    sets = [("scaling", a.data)]
    if glob.glob(run.rst_pat):
        sets.append(("scaling_restart", run.rst_dir))
    # (key, shards dir, the one shard decoders alone read)
    sets = [(key, base, sorted(glob.glob(os.path.join(base, "train-*.tar")))[1])
            for key, base in sets]
    runs = {}  # (key, threads) -> list of (pipeline, decoders alone); ("spin", t) -> list
    med = statistics.median

    def fold():  # the medians over the rounds so far
        R["scaling_spin"] = [{"threads": t, "spin_per_s": med(runs[("spin", t)]),
                              "runs": runs[("spin", t)]} for t in counts]
        for key, _, _ in sets:
            R[key] = [{"threads": t,
                       "img_per_s": med([p for p, _ in runs[(key, t)]]),
                       "runs": [p for p, _ in runs[(key, t)]],
                       "ceiling_img_per_s": med([c for _, c in runs[(key, t)]]),
                       "ceiling_runs": [c for _, c in runs[(key, t)]]} for t in counts]
    ends = [counts[0], counts[-1]]  # the ratio that matters, measured back to back
    for _ in range(rounds):
        for t in ends + [x for x in counts if x not in ends]:
            runs.setdefault(("spin", t), []).append(last_json(sh(
                [db, "--threads", str(t), "--spin"], env=env))["spin_per_s"])
            for key, base, one_shard in sets:
                r = run.bench("--device", a.device, "--batch", "256", "--threads", str(t),
                              "--epochs", str(t), "--warmup", "4",
                              pattern=os.path.join(base, "train-00000?.tar"))
                c = last_json(sh([db, "--threads", str(t), "--reps", "5", one_shard], env=env))
                runs.setdefault((key, t), []).append(
                    (r.get("decode_img_per_s", r["img_per_s"]), c["img_per_s"]))
        fold()
        run.save()
    if glob.glob(run.rst_pat) and a.device == "cuda":
        scaling_gpu(run)


def scaling_gpu(run):
    """GPU decode: decode threads only cut out intervals; the kernels do the decoding. The
    whole restart-marked set, delivered img/s (what a consumer sees)."""
    R = run.R
    R["scaling_gpu"] = []
    for t in sorted({1, 2, 4, 8, run.ncpu}):
        r = run.bench("--device", run.a.device, "--batch", "256", "--threads", str(t),
                      "--epochs", "2", "--warmup", "8", "--gpu-decode", pattern=run.rst_pat)
        R["scaling_gpu"].append({"threads": t, "img_per_s": r["img_per_s"],
                                 "gpu_decoded": r.get("gpu_decoded", 0),
                                 "samples_decoded": r.get("samples_decoded", 0),
                                 "decode_busy_s": r["decode_busy_s"],
                                 "wall_s": r["wall_s"],
                                 **{k: r[k] for k in ("decode_busy_timed_s", "seconds")
                                    if k in r}})


TRAIN_LOADERS = ["synthetic", "ringfeed", "ringfeed_nice", "ringfeed_spare", "ringfeed_gpu",
                 "ringfeed_gpu25", "ringfeed_hw", "ringfeed_hw40", "torch"]


def train_command(run, ex, anchor_py, arch, loader, pat, hw):
    """The example's command line for one training row, or None when the row cannot run here
    (GPU decode without restart-marked shards, the hardware decoders without engines)."""
    ncpu = run.ncpu
    cmd = [sys.executable, ex, "--loader", loader.split("_")[0], "--arch", arch,
           "--shards", pat, "--batch", "256", "--steps", str(run.a.train_steps),
           "--warmup", "20", "--classes", "1000", "--anchor", anchor_py,
           "--workers", str(ncpu), "--decode-threads", str(ncpu),
           "--decode-nice", "0"]  # the example's defaults differ; a row says its own
    if loader in ("ringfeed", "ringfeed_nice", "ringfeed_spare"):
        cmd += ["--schedule", "cpu"]  # the CPU decode rows (AUTO is BALANCE)
    if loader == "ringfeed_nice":
        cmd += ["--decode-nice", "10"]
    if loader == "ringfeed_spare":  # tuning.md's training setting: one CPU spare
        cmd += ["--decode-threads", str(max(1, ncpu - 1)), "--decode-nice", "10"]
    if loader.startswith("ringfeed_gpu"):
        if pat != run.rst_pat:
            return None
        cmd += ["--gpu-decode"]
    if loader == "ringfeed_gpu25":  # the work split: a quarter on the GPU
        cmd += ["--gpu-decode-percent", "25", "--decode-nice", "10"]
    if loader.startswith("ringfeed_hw"):  # the GPU's hardware JPEG decoders
        if not hw:
            return None
        cmd += ["--hw-decode-percent", "100" if loader == "ringfeed_hw" else "40"]
        if loader == "ringfeed_hw40":
            cmd += ["--decode-nice", "10"]
    return cmd


def section_train(run):
    """ResNet training fed by every loader, then DDP on two GPUs when there are two."""
    a, R, env = run.a, run.R, run.env
    ex = os.path.join(REPO, "python", "examples", "train_resnet.py")
    anchor_py = os.path.join(a.anchors, "torch_dataloader.py")
    R["train"] = R.get("train", {})
    R["train_cpus"] = run.ncpu
    # Training reads the restart-marked copy when there is one (what ringfeed-pack
    # --restart gives a user); every input reads the same shards.
    pat = run.rst_pat if glob.glob(run.rst_pat) else run.pat
    R["train_data"] = "restart-marked" if pat == run.rst_pat else "plain"
    # The hardware decoders alone (every image to them) on the training shards, when this
    # GPU has them and libnvjpeg loads (RINGFEED_NVJPEG, docs/gpu-decode.md).
    try:
        R["hw_bench"] = run.bench("--device", "cuda", "--batch", "256", "--epochs", "2",
                                  "--warmup", "8", "--hw-decode", "100", pattern=pat)
    except (Exception, SystemExit) as e:  # no engines or library: rows left out
        print(f"hardware decoders not usable: {e}", file=sys.stderr)
        R.pop("hw_bench", None)
    hw = "hw_bench" in R
    for arch in a.archs.split(","):
        R["train"][arch] = {}
        for loader in TRAIN_LOADERS:
            cmd = train_command(run, ex, anchor_py, arch, loader, pat, hw)
            if cmd is not None:
                R["train"][arch][loader] = last_json(sh(cmd, env=env))
    run.save()
    ngpu = int(subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda."
                               "device_count())"], capture_output=True, text=True,
                              env=env).stdout.strip() or 0)
    if ngpu >= 2:
        train_ddp(run, ex, anchor_py, pat)


def train_ddp(run, ex, anchor_py, pat):
    """DDP: one loader per rank, each with half the CPUs."""
    R = run.R
    env2 = dict(run.env, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
                NVSHMEM_DISABLE_NVLS="1")
    R["ddp"] = {"gpus": 2}
    R.get("machines", {}).pop("ddp", None)
    for loader in ["synthetic", "ringfeed", "torch"]:
        cmd = ["torchrun", "--standalone", "--nproc_per_node", "2", ex, "--loader", loader,
               "--arch", "resnet18", "--shards", pat, "--batch", "256", "--steps",
               str(run.a.train_steps), "--warmup", "20", "--anchor", anchor_py,
               "--workers", str(os.cpu_count() // 2 - 1),
               "--decode-threads", str(os.cpu_count() // 2 - 1), "--decode-nice", "0"]
        if loader == "ringfeed":
            cmd += ["--schedule", "cpu"]  # the CPU decode row, as stored
        R["ddp"][loader] = last_json(sh(cmd, env=env2))


def section_tokens(run):
    """Token windows against the nanoGPT loop, the raw path's GB/s, and resume times."""
    import numpy as np
    a, R, env, B = run.a, run.R, run.env, run.B
    tok = os.path.join(a.data, "tokens.bin")
    np.random.default_rng(0).integers(0, 50257, 200_000_000, dtype=np.uint16).tofile(tok)
    R["tokens"] = last_json(sh([sys.executable, os.path.join(HERE, "token_compare.py"),
                                "--bench", B, "--tokens", tok, "--batch", "64", "--seq-len",
                                "1024", "--batches", "1000"], env=env))
    raw = last_json(sh([B, "--tokens", tok, "--seq-len", "4096", "--batch", "512",
                        "--token-dtype", "uint16", "--windows", "sequential", "--device",
                        "cuda", "--epochs", "2", "--warmup", "10", "--io-threads", "4",
                        "--json"], env=env))
    R["raw_gb_s"] = raw["gb_per_s_to_device"]
    tok1m = os.path.join(a.data, "tokens1m.bin")
    np.arange(16_000_017, dtype=np.uint32).astype(np.uint16).tofile(tok1m)
    R["resume"] = {}
    for f in ["0.01", "0.9"]:
        r = last_json(sh([B, "--tokens", tok1m, "--seq-len", "16", "--batch", "1024",
                          "--device", a.device, "--epochs", "1", "--resume-at", f, "--json"],
                         env=env))
        R["resume"][f] = {k: r[k] for k in ("samples", "fresh_ms", "resume_ms",
                                            "resume_position")}


def section_order(run):
    """Global and shard order from the page cache and from an evicted (cold) cache."""
    R, shards = run.R, run.shards
    R["order"] = {}
    for order in ["global", "shard"]:
        warm(shards)
        hot = run.bench("--device", run.a.device, "--order", order, "--epochs", "1")
        evict(shards)
        cold = run.bench("--device", run.a.device, "--order", order, "--epochs", "1")
        R["order"][order] = {"page_cache": hot["img_per_s"], "cold": cold["img_per_s"]}
    warm(shards)


def section_memory(run):
    """The memory hierarchy (docs/tuning.md): copies and allocations, cold and hot caches."""
    a, bench = run.a, run.bench
    mb = os.path.join(a.build, "tools", "ringfeed-membench")
    M = run.R["memory"] = {"membench": last_json(sh([mb, "--json"], env=run.env))
                           if a.device != "host" else None}
    M["cold_2_epochs"] = bench("--device", a.device, "--evict", "--epochs", "2")
    M["cold_warm"] = bench("--device", a.device, "--evict", "--warm", "--epochs", "1")
    M["cold_odirect"] = bench("--device", a.device, "--evict", "--odirect", "--epochs", "1")
    M["cold_buffered"] = bench("--device", a.device, "--evict", "--epochs", "1")
    warm(run.shards)
    M["hot"] = bench("--device", a.device, "--epochs", "1")
    M["hugepages"] = bench("--device", a.device, "--hugepages", "--epochs", "1")
    M["naive"] = bench("--device", a.device, "--naive", "--epochs", "1")


def section_raw(run):
    """The raw path: token windows of several sizes straight into GPU memory."""
    import numpy as np
    a, R = run.a, run.R
    run.save()
    tok = os.path.join(a.data, "raw.bin")
    np.arange(1 << 30, dtype=np.uint32).astype(np.uint16).tofile(tok)  # 2 GiB
    warm([tok])
    R["raw"] = []
    for L_, b_, io_ in [(4096, 512, 4), (32768, 64, 4), (32768, 64, 8), (131072, 16, 8)]:
        r = last_json(sh([run.B, "--tokens", tok, "--seq-len", str(L_), "--batch", str(b_),
                          "--token-dtype", "uint16", "--windows", "sequential", "--order",
                          "none", "--device", a.device, "--epochs", "2", "--warmup", "10",
                          "--io-threads", str(io_), "--json"], env=run.env))
        R["raw"].append({"seq_len": L_, "batch": b_, "io_threads": io_,
                         "gb_per_s": r["gb_per_s_to_device"]})
    os.remove(tok)


def section_reliability(run):
    """Skip mode's cost on a copy with corrupted JPEGs, and a soak."""
    a, R, bench = run.a, run.R, run.bench
    run.save()
    cor = a.data + "-corrupt"
    shutil.rmtree(cor, ignore_errors=True)
    made = last_json(sh([sys.executable, os.path.join(HERE, "corrupt.py"), "--fraction",
                         "0.01", a.data, cor]))
    cshards = sorted(glob.glob(os.path.join(cor, "train-*.tar")))
    warm(cshards)
    clean = bench("--device", a.device, "--on-error", "skip", "--epochs", "2", "--warmup", "8")
    dirty = bench("--device", a.device, "--on-error", "skip", "--epochs", "2", "--warmup", "8",
                  pattern=os.path.join(cor, "train-*.tar"))
    R["reliability"] = {"corrupted": made, "clean_img_per_s": clean["img_per_s"],
                        "corrupt_img_per_s": dirty["img_per_s"], "skipped": dirty["skipped"],
                        "skipped_by_reason": dirty["skipped_by_reason"]}
    shutil.rmtree(cor, ignore_errors=True)
    t0 = time.time()
    soak = bench("--device", a.device, "--epochs", str(a.soak_epochs))
    R["soak"] = {"seconds": time.time() - t0, "epochs": a.soak_epochs,
                 "pinned_bytes": soak["pinned_bytes"],
                 "device_pool_reserved_bytes": soak.get("device_pool_reserved_bytes"),
                 "per_epoch": soak["per_epoch"]}


# The multicrop section's runs: DINO's views decoded once, and single views of the same crops.
MULTICROP_RUNS = [
    ("one 224 view, scale 0.08-1 (the default)", []),
    ("one 224 view, scale 0.4-1", ["--scale-min", "0.4", "--scale-max", "1"]),
    ("one 96 view, scale 0.05-0.4", ["--image-size", "96", "--scale-min", "0.05",
                                      "--scale-max", "0.4"]),
    ("`--multi-crop 2x224:0.4-1`", ["--multi-crop", "2x224:0.4-1"]),
    ("`--multi-crop 2x224:0.4-1,6x96:0.05-0.4` (DINO)",
     ["--multi-crop", "2x224:0.4-1,6x96:0.05-0.4"]),
]


def section_multicrop(run, rounds=3):
    """Multi-crop views (rf_config.multi_crop) against single views of the same crops, on the
    CPU decode path: images/s (the best of `rounds` interleaved rounds) and the CPU time of the
    bench process per sample (its user + system time over every sample it decoded, median),
    which other load on the machine inflates far less than the wall time."""
    a = run.a
    got = {name: [] for name, _ in MULTICROP_RUNS}
    for _ in range(rounds):
        for name, flags in MULTICROP_RUNS:
            t0 = os.times()
            r = run.bench("--device", a.device, "--batch", "256", "--epochs", "2", "--warmup",
                          "4", *flags)
            t1 = os.times()
            cpu = t1.children_user - t0.children_user + t1.children_system - t0.children_system
            got[name].append((r["img_per_s"], 1000 * cpu / r["samples_decoded"],
                              r["bytes_to_device"] / r["samples_decoded"]))
    m = machine()
    run.R["multicrop"] = {
        "note": f"{m.get('cpu', '?')}, {m['cpus']} CPUs, {a.device} backend, {run.ncpu} decode "
                f"threads, batch 256, 2 epochs; the {run.R['dataset']['images']} images of the "
                "sections above",
        "rows": [{"run": name, "img_per_s": max(v[0] for v in got[name]),
                  "cpu_ms_per_sample": statistics.median(v[1] for v in got[name]),
                  "bytes_per_sample": got[name][0][2]} for name, _ in MULTICROP_RUNS]}


# The targets section's runs: the decode alone, then with the sample's mask and boxes.
TARGET_FLAGS = {"mask": ["--mask", "seg.png"],
                "boxes": ["--box-json-path", "boxes", "--box-class-json-path", "classes",
                          "--max-boxes", "16"]}
TARGET_RUNS = [("the image", []), ("with its mask", TARGET_FLAGS["mask"]),
               ("with its boxes", TARGET_FLAGS["boxes"]),
               ("with its mask and boxes", TARGET_FLAGS["mask"] + TARGET_FLAGS["boxes"])]


def section_targets(run, rounds=3):
    """Masks and boxes (rf_config.mask, box_json_path) on a dense photo set that carries them
    (datasets/photos.py --profile dense --targets): on the CPU decode path the bench process's
    CPU time per sample (median of `rounds` interleaved rounds) and images/s (the best); on a
    CUDA device also gpu_decode with and without them."""
    a = run.a
    root, images = a.data + "-targets", a.target_images
    shards = make_photos(root, images, a.photo_sources, run.ncpu, run.env, "dense", True)
    pat = os.path.join(root, "photos-*.tar")
    paths = [("CPU", [])] + ([("gpu_decode", ["--gpu-decode"])] if a.device == "cuda" else [])
    got = {(p, name): [] for p, _ in paths for name, _ in TARGET_RUNS}
    for _ in range(rounds):
        for p, pflags in paths:
            for name, flags in TARGET_RUNS:
                t0 = os.times()
                r = run.bench("--device", a.device, "--batch", "256", "--epochs", "2",
                              "--warmup", "1", *pflags, *flags, pattern=pat)
                t1 = os.times()
                cpu = t1.children_user - t0.children_user + t1.children_system - t0.children_system
                got[(p, name)].append((r["img_per_s"], 1000 * cpu / r["samples_decoded"]))
    m = machine()
    run.R["targets"] = {
        "note": f"{m.get('cpu', '?')}, {m['cpus']} CPUs, {a.device} backend, {run.ncpu} decode "
                f"threads, batch 256, 2 epochs; {len(shards)} shards of {images} dense photo "
                "crops with targets",
        "rows": [{"path": p, "run": name, "img_per_s": max(v[0] for v in got[(p, name)]),
                  "cpu_ms_per_sample": statistics.median(v[1] for v in got[(p, name)])}
                 for p, _ in paths for name, _ in TARGET_RUNS]}


def main():
    ap, a, skip = parse_args()
    os.makedirs(a.out, exist_ok=True)
    env = child_env(a.build)
    if not set(a.photo_profiles.split(",")) <= set(PHOTO_PROFILES):
        ap.error(f"--photo-profiles: {a.photo_profiles} (profiles: dense, smooth)")
    if "photos" not in skip:
        check_photo_inputs(a.photo_sources, env)
        why = "dense" in a.photo_profiles and importable("numpy, PIL", env)
        if why:
            raise SystemExit(f"photos: the dense set needs numpy and Pillow ({why})")
    R = json.load(open(a.merge)) if a.merge else {}
    # A merged run keeps the first machine's description and records its own beside it, under
    # the sections it re-measured.
    ran = ",".join(x for x in SECTIONS if x not in skip)
    if a.merge:
        merge_notes(R, ran)
    if a.merge and "side" in skip:
        R.setdefault("machines", {})[ran] = machine()
    else:  # the side-by-side run's machine is the one the report opens with
        R["machine"] = machine()
    run = Run(a, skip, env, R)
    section_data(run)
    if "side" not in skip:
        R.update(run.side_by_side(run.pat))
    run.save()
    section_restart(run)
    run.save()
    if "photos" not in skip:  # plain JPEG photographs: ringfeed beside DALI and the DataLoader
        for profile in a.photo_profiles.split(","):
            photos_section(a, R, env, run.B, run.save, skip, profile)
    run.save()
    if "scaling" not in skip:
        section_scaling(run)
    run.save()
    if "train" not in skip:
        section_train(run)
    if "tokens" not in skip:
        section_tokens(run)
    run.save()
    if "order" not in skip:
        section_order(run)
    run.save()
    if "memory" not in skip:
        section_memory(run)
    if "raw" not in skip:
        section_raw(run)
    if "reliability" not in skip:
        section_reliability(run)
    run.save()
    if "multicrop" not in skip:
        section_multicrop(run)
    run.save()
    if "targets" not in skip:
        section_targets(run)
    json.dump(R, open(os.path.join(a.out, "results.json"), "w"), indent=1)
    write_report(R, a.out)


class Plots:
    """The report's figures: pyplot with the file-only backend, each figure saved into `out`."""

    def __init__(self, out):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        self.plt, self.out = plt, out

    def save(self, png, xlabel, ylabel=None, legend=False):  # the end of every figure
        plt = self.plt
        plt.xlabel(xlabel)
        if ylabel:
            plt.ylabel(ylabel)
        if legend:
            plt.legend()
        plt.tight_layout()
        plt.savefig(os.path.join(self.out, png), dpi=120)
        plt.close()  # pyplot keeps every open figure alive

    def loaders(self, rows, png, xlabel, alt, colors=None):
        """Bars of (name, img/s) rows; by default ringfeed's red but the last two (the
        DataLoaders) grey."""
        plt = self.plt
        plt.figure(figsize=(6, max(3, 0.4 * len(rows) + 1)))
        colors = colors or ["#c33"] * (len(rows) - 2) + ["#888", "#888"]
        plt.barh([r[0] for r in rows][::-1], [r[1] for r in rows][::-1], color=colors[::-1])
        self.save(png, xlabel)
        return [f"![{alt}]({png})", ""]


def loader_table(S):
    """S: a side_by_side() result; its rows and the markdown table, with ringfeed's ratio
    to each row (and GPU decode's, when it ran)."""
    rf, gpu = S["ringfeed"], S.get("ringfeed_gpu")
    rows = []
    if gpu:
        rows.append(("ringfeed, GPU decode (`gpu_decode`), %d threads" % gpu["decode_threads"],
                     gpu["img_per_s"]))
    rows += [("ringfeed, %d decode threads, to GPU memory" % rf["decode_threads"], rf["img_per_s"]),
             ("PyTorch DataLoader + PIL, %d workers" % S["anchor_pil"]["workers"], S["anchor_pil"]["img_per_s"]),
             ("PyTorch DataLoader + torchvision.io, %d workers" % S["anchor_tv"]["workers"], S["anchor_tv"]["img_per_s"])]
    head = "| loader | img/s | ringfeed (CPU decode) is |"
    if gpu:
        head += " ringfeed (GPU decode) is |"
    lines = [head, "| --- | ---: | ---: |" + (" ---: |" if gpu else "")]
    for name, v in rows:
        line = f"| {name} | {v:,.0f} | {rf['img_per_s'] / v:.2f}x |"
        lines.append(line + (f" {gpu['img_per_s'] / v:.2f}x |" if gpu else ""))
    return rows, lines


def report_head(R):
    """The title, the machine, the dataset and the notes on stale figures."""
    L = []
    m = R["machine"]
    L += ["# Performance", "",
          "Measured by `tools/perf_report.py` on the GPU machine in one command (ratios come "
          "from runs in that same command, on the same shards). Regenerate with the command in "
          "docs/gpu.md.", "",
          f"Machine: {m.get('cpu', '?')}, {m.get('cpus')} CPUs, {m.get('mem_gib')} GiB, NUMA "
          f"nodes {m.get('numa_nodes')}; GPU {m.get('gpu')}; torch {m.get('torch')}, torchvision "
          f"{m.get('torchvision')}; kernel {m.get('kernel')}.", ""]
    d = R["dataset"]
    L += [f"Data: {d['images']} synthetic ImageNet-like JPEGs (`ringfeed-gen`, quality 90, mean "
          f"{d['mean_jpeg_kb']:.0f} KB) in {d['shards']} WebDataset shards, page-cache resident. "
          f"Generated at {d['generator_mb_s']:.0f} MB/s.", ""]
    for sec, text in R.get("stale", {}).items():  # until the section is measured again
        L += [f"**Changed since the `{sec}` figures below were measured:** {text}", ""]
    return L


def report_side(R, plots):
    """ringfeed beside the DataLoaders on the plain shards, and its per-stage breakdown."""
    rf = R["ringfeed"]
    rows, table = loader_table(R)
    L = ["## RandomResizedCrop 224 + flip, batch 256, to the GPU", ""] + table
    rss = [e.get("rss_mb", 0) for e in rf.get("per_epoch", [])]
    L += ["", f"First batch: ringfeed {rf['first_batch_ms']:.0f} ms after create (create "
          f"itself {rf.get('create_ms', 0):.0f} ms: shard indexes, pinned ring); DataLoader "
          f"{R['anchor_pil']['first_batch_s'] * 1e3:.0f} ms from the start of iteration.",
          "", f"Host RSS at the end of each epoch: {', '.join(f'{x:.0f}' for x in rss)} MB "
          f"(pinned ring {rf.get('pinned_bytes', 0) / 2**20:.0f} MB).", "",
          "Per-stage breakdown (ringfeed run above, seconds summed over threads):", ""]
    L += ["| stage | busy s | " + ("of the timed window x threads |" if
                                  "decode_busy_timed_s" in rf else "of wall x threads |"),
          "| --- | ---: | ---: |"]
    for name, key, thr in [("I/O", "io_busy_s", rf["io_threads"]),
                           ("decode", "decode_busy_s", rf["decode_threads"]),
                           ("copy enqueue", "copy_busy_s", 1),
                           ("consumer waited", "consumer_wait_s", 1)]:
        v, wall = window(rf, key)
        L.append(f"| {name} | {v:.2f} | {100 * v / (wall * thr):.0f}% |")
    L.append("")
    L += plots.loaders(rows, "throughput.png", "images/s (RandomResizedCrop 224, to GPU)",
                       "throughput per loader")
    return L


def report_restart(R, plots):
    """The loaders again on the restart-marked copy, with GPU decode when it ran."""
    X = R["restart"]
    d = R["dataset"]
    rf = X["ringfeed"]
    plain = R.get("ringfeed", {}).get("img_per_s")
    rows, table = loader_table(X)
    L = ["## The same images with restart markers (`ringfeed-pack --restart`)", "",
         "The shards above rewritten losslessly with a restart marker every few MCUs "
         f"(`ringfeed-gen --restart`, the rewrite `ringfeed-pack --restart` does: identical "
         f"decoded pixels, {100 * (X['bytes'] / d['bytes'] - 1):.1f}% more bytes). ringfeed "
         "then entropy-decodes only the MCUs each crop needs "
         f"({100 * rf.get('region_decoded', 0) / max(rf.get('samples_decoded', 1), 1):.0f}% "
         "of images took that path); the DataLoaders decode them as before.", ""] + table
    if plain:
        L += ["", f"ringfeed on these shards vs the plain ones above: {rf['img_per_s']:,.0f} vs "
              f"{plain:,.0f} img/s ({rf['img_per_s'] / plain:.2f}x)."]
    g = X.get("ringfeed_gpu")
    if g:
        v, wall = window(g)
        busy = v / (wall * g["decode_threads"])
        L += ["", f"GPU decode (`gpu_decode`, docs/gpu-decode.md): the decode threads read each "
              "header, choose the crop and copy the restart intervals it needs with the "
              "tables and resize plans into the slot; kernels on the copy stream do the "
              "Huffman decoding, IDCT, upsampling, colour conversion and resize, byte for "
              "byte what the CPU path gives at full scale. "
              f"{100 * g.get('gpu_decoded', 0) / max(g.get('samples_decoded', 1), 1):.0f}% of "
              f"images took it; the decode threads were busy {100 * busy:.0f}% of the time."]
    L.append("")
    L += plots.loaders(rows, "throughput_restart.png",
                       "images/s (RandomResizedCrop 224, to GPU; restart-marked shards)",
                       "throughput per loader, restart-marked shards")
    return L


def scaling_table(R, key, title, spin):
    """One set's scaling table (plain or restart-marked shards) and its round-by-round
    ratios."""
    s = R[key]
    one = s[0]["img_per_s"]
    c1 = s[0].get("ceiling_img_per_s")
    L = [f"{title}:", "", "| threads | img/s | speed-up | efficiency | runs | "
         "decoders alone speed-up | cores alone speed-up |",
         "| ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for r in s:
        c = r.get("ceiling_img_per_s")
        rr = r.get("runs") or [r["img_per_s"]]
        sp = spin.get(r["threads"])
        L.append(f"| {r['threads']} | {r['img_per_s']:,.0f} | {r['img_per_s'] / one:.1f}x | "
                 f"{r['img_per_s'] / one / r['threads'] * 100:.0f}% | "
                 f"{min(rr):,.0f}-{max(rr):,.0f} | "
                 + (f"{c / c1:.1f}x" if c and c1 else "-") + " | "
                 + (f"{sp / spin[1]:.1f}x" if sp and spin.get(1) else "-") + " |")
    t = s[-1]
    L += ["", f"{t['threads']} threads: {t['img_per_s'] / one:.1f}x one thread, against "
          f"a target of {0.9 * t['threads']:.1f}x (0.9 x {t['threads']})."]
    # A round runs 1 and 16 threads back to back: its own ratio leaves out the
    # machine's drift from round to round.
    ps = R.get("scaling_spin", [])
    per_round = [(label, [x / y for x, y in zip(hi, lo)]) for label, hi, lo in [
        ("the pipeline", t.get("runs", []), s[0].get("runs", [])),
        ("the decoders alone", t.get("ceiling_runs", []), s[0].get("ceiling_runs", [])),
        ("the cores alone", ps[-1]["runs"] if ps else [], ps[0]["runs"] if ps else [])]]
    n = len(per_round[0][1])
    if n > 1:
        L[-1] += " Round by round, " + "; ".join(
            f"{label} {', '.join(f'{x:.1f}x' for x in v)} (median "
            f"{statistics.median(v):.1f}x)" for label, v in per_round if len(v) == n) + "."
    L += [""]
    return L


def report_scaling_gpu(R, plots):
    """GPU decode's thread curve, beside CPU decode's on the same shards."""
    plt = plots.plt
    s = R["scaling_gpu"]
    L = ["GPU decode (`gpu_decode`), restart-marked shards, all 20,000 images, delivered "
         "img/s. The threads only cut out restart intervals (the rest is the GPU's), so "
         "a few of them saturate what the pipeline can move:", "",
         "| threads | img/s | decode threads busy |", "| ---: | ---: | ---: |"]
    for r in s:
        L.append(f"| {r['threads']} | {r['img_per_s']:,.0f} | "
                 f"{100 * window(r)[0] / (window(r)[1] * r['threads']):.0f}% |")
    plt.figure(figsize=(5.5, 3.5))
    plt.plot([r["threads"] for r in s], [r["img_per_s"] for r in s], "D-", color="C3",
             label="GPU decode")
    if "scaling_restart" in R:
        c = R["scaling_restart"]
        plt.plot([r["threads"] for r in c], [r["img_per_s"] for r in c], "s-", color="C1",
                 label="CPU decode")
    plots.save("scaling_gpu.png", "decode threads", "images/s (restart-marked shards)",
               legend=True)
    L += ["", "![GPU decode scaling](scaling_gpu.png)", ""]
    return L


def scaling_plot(R, plots):
    """The speed-up curves of every set against linear."""
    plt = plots.plt
    plt.figure(figsize=(5.5, 3.8))
    for key, label, mk, col in [("scaling", "plain shards", "o", "C0"),
                                ("scaling_restart", "restart-marked shards", "s", "C1")]:
        if key not in R:
            continue
        rs = R[key]
        th = [r["threads"] for r in rs]
        plt.plot(th, [r["img_per_s"] / rs[0]["img_per_s"] for r in rs], mk + "-", color=col,
                 label=f"ringfeed, {label}")
        if rs[0].get("ceiling_img_per_s"):
            plt.plot(th, [r["ceiling_img_per_s"] / rs[0]["ceiling_img_per_s"] for r in rs],
                     mk + ":", color=col, alpha=0.6, label=f"decoders alone, {label}")
    if R.get("scaling_spin"):
        sp = R["scaling_spin"]
        plt.plot([r["threads"] for r in sp], [r["spin_per_s"] / sp[0]["spin_per_s"]
                                              for r in sp], "x-.", color="C2",
                 label="cores alone (integer loop)")
    th = [r["threads"] for r in R["scaling"]]
    plt.plot(th, th, "--", color="#999", label="linear")
    plt.plot(th, [0.9 * t for t in th], "-.", color="#bbb", label="0.9 x linear")
    plots.save("scaling.png", "decode threads", "speed-up over one thread", legend=True)
    return ["", "![scaling](scaling.png)", ""]


def report_scaling(R, plots):
    """The decode-thread scaling section: its tables, GPU decode's curve and the plot."""
    L = ["## Decode-thread scaling", "",
         "(Measured in its own command: see the note below the plot.)", "",
         "RandomResizedCrop 224 to the GPU. Every thread count was run "
         f"{len(R['scaling'][0].get('runs', [0]))} times, the rounds interleaved, and the "
         "table gives the medians (one thread of the same loop can run several percent "
         "faster in one call than in the next on this shared host). Pipeline: ringfeed-bench, "
         "images decoded inside the timed window. Decoders alone: `ringfeed-decode-bench "
         "--threads N`, N decoders over the same images sharing one work counter, nothing "
         "else. Cores alone: `ringfeed-decode-bench --threads N --spin`, an integer loop "
         "that touches no memory, so its speed-up is what all-core clocks allow any "
         "CPU-bound work.", ""]
    spin = {r["threads"]: r["spin_per_s"] for r in R.get("scaling_spin", [])}
    for key, title in [("scaling", "plain shards"), ("scaling_restart", "restart-marked shards")]:
        if key in R:
            L += scaling_table(R, key, title, spin)
    if "scaling_gpu" in R:
        L += report_scaling_gpu(R, plots)
    L += scaling_plot(R, plots)
    return L


def report_machines(R):
    """The machines of the sections re-measured in commands of their own."""
    L = []
    for ran, mr in R.get("machines", {}).items():
        note = (f" (one-GPU runs limited to {R.get('train_cpus', '?')} decode threads / "
                f"DataLoader workers)" if "train" in ran
                and (mr.get("cpus") or 0) > (R.get("train_cpus") or 0) else "")
        L += [f"Sections `{ran}` re-measured in a separate command on: {mr.get('cpu', '?')}, "
              f"{mr.get('cpus')} CPUs{note}, GPUs {mr.get('gpu', '?').replace(chr(10), '; ')}.", ""]
    return L


TRAIN_ROW_NAMES = [
    ("synthetic", "batch already on the GPU (GPU-bound)"),
    ("ringfeed", "ringfeed"),
    ("ringfeed_nice", "ringfeed, decode threads at nice 10 (`decode_nice`)"),
    ("ringfeed_spare", None),  # named with the run's CPUs (report_train)
    ("ringfeed_gpu", "ringfeed, GPU decode (`gpu_decode`)"),
    ("ringfeed_gpu25", "ringfeed, 25% GPU decode (`gpu_decode_percent 25`), decode threads at "
                       "nice 10"),
    ("ringfeed_hw", "ringfeed, hardware JPEG decoders (`hw_decode_percent 100`)"),
    ("ringfeed_hw40", "ringfeed, 40% to the hardware JPEG decoders (`hw_decode_percent 40`), "
                      "decode threads at nice 10"),
    ("torch", "PyTorch DataLoader + PIL")]


def report_train(R):
    """A table per model: every input's img/s as a share of the GPU-bound rate."""
    L = []
    for arch, t in R["train"].items():
        if "synthetic" not in t:
            continue
        gb = t["synthetic"]["img_per_s"]
        spare = (f"ringfeed, {R.get('train_cpus', 1) - 1} decode threads (one CPU left to the "
                 f"training loop) at nice 10")
        L += [f"## {arch} training (bf16, channels_last, batch 256, "
              f"{t['ringfeed'].get('steps', '?')} steps after 20 of warm-up, "
              f"{R.get('train_data', 'plain')} shards, {R.get('train_cpus', '?')} decode "
              f"threads / workers)", "",
              "| input | img/s | of GPU-bound | GPU waited for data |",
              "| --- | ---: | ---: | ---: |"]
        for k, name in TRAIN_ROW_NAMES:
            if k not in t:
                continue
            name = spare if name is None else name
            L.append(f"| {name} | {t[k]['img_per_s']:,.0f} | {100 * t[k]['img_per_s'] / gb:.0f}% "
                     f"| {100 * t[k]['gpu_wait_fraction']:.0f}% |")
        L.append("")
    hb = R.get("hw_bench")
    if hb and any("ringfeed_hw" in t for t in R["train"].values()):
        L += [f"Each training step ends by synchronizing the training stream, not the device "
              f"(python/examples/train_resnet.py). The hardware JPEG decoders alone, every "
              f"image to them (`ringfeed-bench --hw-decode 100`, same shards): "
              f"{hb['img_per_s']:,.0f} img/s into GPU memory, the {hb['decode_threads']} "
              f"decode threads busy {window(hb)[0]:.1f} s in {window(hb)[1]:.1f} s "
              f"(headers, crops and copies only). While a model trains they slow its steps "
              f"although it hardly waits for data (docs/gpu-decode.md).", ""]
    return L


def report_ddp(R):
    d = R["ddp"]
    L = ["## Two GPUs, DDP (`torchrun --nproc_per_node 2`, ResNet-18, batch 256 per rank)", "",
         "| input | total img/s | GPU waited | batches per epoch on each rank |",
         "| --- | ---: | ---: | --- |"]
    for k, name in [("synthetic", "batch already on the GPU"), ("ringfeed", "ringfeed"),
                    ("torch", "PyTorch DataLoader + PIL")]:
        per = d[k].get("batches_per_epoch_per_rank")
        L.append(f"| {name} | {d[k]['img_per_s']:,.0f} | {100 * d[k]['gpu_wait_fraction']:.0f}% "
                 f"| {per if per and per[0] is not None else '-'} |")
    L.append("")
    return L


def report_tokens(R):
    """Token windows and the raw path's GB/s, then resume."""
    tk = R["tokens"]
    L = ["## Token windows (64 x 1024, uint16 on disk, int64 on the GPU)", "",
         "| loader | batches/s |", "| --- | ---: |",
         f"| ringfeed (widened on the GPU) | {tk['ringfeed_batches_per_s']:,.0f} |",
         f"| nanoGPT memmap + stack + pin_memory + to(non_blocking) | {tk['nanogpt_batches_per_s']:,.0f} |",
         "", f"ringfeed is {tk['ratio']:.1f}x. Raw path (512 x 4096 uint16 windows, 4 I/O "
         f"threads, page cache): {R['raw_gb_s']:.1f} GB/s into GPU memory.", ""]
    rs = R["resume"]
    L += ["## Resume (1 M-sample epoch)", "", "| saved at | position | create + first batch |",
          "| --- | ---: | ---: |"]
    for f, v in rs.items():
        L.append(f"| {float(f) * 100:.0f}% | {v['resume_position']:,} | {v['resume_ms']:.1f} ms |")
    L += ["", f"A fresh loader takes {rs['0.9']['fresh_ms']:.1f} ms to its first batch.", ""]
    return L


def report_order(R):
    o = R["order"]
    L = ["## Epoch order and the page cache", "", "| order | page cache img/s | cold img/s |",
         "| --- | ---: | ---: |"]
    for k, v in o.items():
        L.append(f"| {k} | {v['page_cache']:,.0f} | {v['cold']:,.0f} |")
    L.append("")
    return L


def memory_ratios(r, run):
    """The hit ratio (the share of the bytes read that did not come from storage) and
    the share resident at submit of a run, or of one of its epochs (r). A run stored
    before storage accounting (no storage_read_bytes) has only the residency, which it
    called cache_hit_ratio; a ratio the run could not measure is null."""
    def f(v):
        return "—" if v is None else f"{v:.3f}"
    if "storage_read_bytes" not in run:
        return "—", f(r.get("cache_hit_ratio"))
    return f(r.get("cache_hit_ratio")), f(r.get("resident_at_submit_ratio"))


def report_memory(R):
    """The memory hierarchy: membench's copies and allocations, then the cache runs."""
    M = R["memory"]
    mb = M["membench"] or {}
    L = ["## Memory hierarchy (details in docs/tuning.md)", ""]
    if mb:
        L += [
          f"One {mb['bytes'] / 1e6:.1f} MB batch, {mb['iters']} copies each:", "",
          "| measurement | value |", "| --- | ---: |",
          f"| H2D from pageable memory | {mb['h2d_pageable_gbs']:.1f} GB/s |",
          f"| H2D from cudaHostAlloc (pinned) | {mb['h2d_pinned_gbs']:.1f} GB/s |",
          f"| H2D from cudaHostRegister, 4 KiB pages | {mb['h2d_registered_4k_gbs']:.1f} GB/s |",
          f"| H2D from cudaHostRegister, 2 MiB pages | {mb['h2d_registered_2m_gbs']:.1f} GB/s |",
          f"| cudaHostAlloc | {mb['host_alloc_ms']:.2f} ms |",
          f"| cudaHostRegister, 4 KiB / 2 MiB pages | {mb['register_4k_ms']:.2f} / {mb['register_2m_ms']:.2f} ms |",
          f"| cudaMalloc + cudaFree per batch | {mb['malloc_free_us']:.1f} us |",
          f"| pool alloc + free per batch (ringfeed) | {mb['pool_alloc_free_us']:.1f} us |", ""]
    L += ["| run (RandomResizedCrop 224 to GPU) | img/s | page-cache hit ratio | "
          "resident at submit | notes |", "| --- | ---: | ---: | ---: | --- |"]

    def row(name, r, note=""):
        hit, res = memory_ratios(r, r)
        L.append(f"| {name} | {r['img_per_s']:,.0f} | {hit} | {res} | {note} |")
    c2 = M["cold_2_epochs"]
    for i, ep in enumerate(c2.get("per_epoch", [])):
        hit, res = memory_ratios(ep, c2)
        L.append(f"| cold cache, epoch {i + 1} | {ep.get('img_per_s', 0):,.0f} | {hit} | "
                 f"{res} | |")
    row("cold + --warm", M["cold_warm"], f"warmed {M['cold_warm'].get('warmed_bytes', 0) / 1e6:.0f} MB")
    row("cold, buffered", M["cold_buffered"])
    row("cold, --odirect", M["cold_odirect"], M["cold_odirect"].get("memory_why", ""))
    row("page cache", M["hot"], f"ring pinned in {M['hot'].get('ring_register_ms', 0):.1f} ms; "
        f"device allocs after create {M['hot'].get('device_allocs_after_create')}")
    row("page cache, --hugepages", M["hugepages"],
        f"hugepages={M['hugepages'].get('hugepages')}, ring pinned in "
        f"{M['hugepages'].get('ring_register_ms', 0):.1f} ms")
    row("--naive (sync reads, pageable, cudaMalloc per batch)", M["naive"],
        f"device allocs after create {M['naive'].get('device_allocs_after_create')}")
    L.append("")
    return L


def report_raw(R):
    L = ["## Raw path: uint16 token windows into GPU memory (page cache, no conversion)", "",
         "| tokens per window | batch | bytes per read | I/O threads | GB/s |",
         "| ---: | ---: | ---: | ---: | ---: |"]
    for r in R["raw"]:
        L.append(f"| {r['seq_len']:,} | {r['batch']} | {(r['seq_len'] + 1) * 2:,} | "
                 f"{r['io_threads']} | {r['gb_per_s']:.1f} |")
    L.append("")
    return L


def report_reliability(R):
    r = R["reliability"]
    c = r["corrupted"]
    return ["## Skip mode and a soak (docs/reliability.md)", "",
            f"With `--on-error skip`, {c['corrupted']} of {c['samples']} JPEGs corrupted "
            f"({c['not_jpeg']} without SOI, {c['corrupt_data']} with an EOI in their entropy "
            f"data; `tools/corrupt.py`): {r['corrupt_img_per_s']:,.0f} img/s against "
            f"{r['clean_img_per_s']:,.0f} on the clean copy, {r['skipped']} samples skipped over "
            f"two epochs ({', '.join(f'{k} {v}' for k, v in r['skipped_by_reason'].items() if v)}).", ""]


def report_soak(R, plots):
    plt = plots.plt
    k = R["soak"]
    ep = k["per_epoch"]
    rss = [e["rss_mb"] for e in ep]
    fds = [e.get("open_fds", 0) for e in ep]
    L = [f"Soak: {k['epochs']} epochs in {k['seconds']:.0f} s. Resident set per epoch "
         f"{min(rss):.0f}-{max(rss):.0f} MB, open descriptors {min(fds)}-{max(fds)}, pinned "
         f"ring {k['pinned_bytes'] / 2**20:.0f} MB and device pool "
         f"{(k['device_pool_reserved_bytes'] or 0) / 2**20:.0f} MB throughout.", ""]
    plt.figure(figsize=(5, 3))
    plt.plot(range(1, len(rss) + 1), rss, "o-", ms=3)
    plt.ylim(0, max(rss) * 1.3)
    plots.save("soak.png", "epoch", "resident set (MB)")
    L += ["![resident set per epoch](soak.png)", ""]
    return L


def report_multicrop(R):
    M = R["multicrop"]
    rows = {r["run"]: r for r in M["rows"]}
    L = ["## Multi-crop views (`multi_crop`, DINO's 2 x 224 + 6 x 96)", "",
         f"Measured on: {M['note']}. CPU decode, uint8 NHWC views; CPU ms per sample: the "
         "bench process's user + system time over the samples it decoded (median of the rounds; "
         "load from other processes inflates it far less than wall time); images/s: the best "
         "round.", "",
         "| run | CPU ms / sample | images/s | output bytes / sample |",
         "| --- | ---: | ---: | ---: |"]
    for r in M["rows"]:
        L.append(f"| {r['run']} | {r['cpu_ms_per_sample']:.2f} | {r['img_per_s']:,.0f} | "
                 f"{r['bytes_per_sample']:,.0f} |")
    dino = rows.get(MULTICROP_RUNS[4][0])
    g, l_ = rows.get(MULTICROP_RUNS[1][0]), rows.get(MULTICROP_RUNS[2][0])
    one = rows.get(MULTICROP_RUNS[0][0])
    if dino and g and l_ and one and min(dino["cpu_ms_per_sample"],
                                          one["cpu_ms_per_sample"]) > 0:
        apart = 2 * g["cpu_ms_per_sample"] + 6 * l_["cpu_ms_per_sample"]
        L += ["", f"Eight views decoded once: {dino['cpu_ms_per_sample']:.2f} ms of CPU per "
              f"sample, {dino['cpu_ms_per_sample'] / one['cpu_ms_per_sample']:.2f}x one plain "
              f"224 crop; the same eight crops as single-view decodes (2 x "
              f"{g['cpu_ms_per_sample']:.2f} + 6 x {l_['cpu_ms_per_sample']:.2f}) would cost "
              f"{apart:.2f} ms, {apart / dino['cpu_ms_per_sample']:.1f}x as much. The decode of "
              "the union of the views' crops dominates (a 0.4-1 global view needs most of the "
              "image, and the DCT scale that serves every view is the smallest view's); each "
              "further view adds its resize."]
    return L + [""]


def report_targets(R):
    T = R["targets"]
    L = ["## Segmentation masks and boxes (`mask`, `box_json_path`)", "",
         f"Measured on: {T['note']}. Each sample's `KEY.seg.png` (8-bit gray, its image's size) "
         "is decoded whole and resized by nearest neighbour onto the output, its `KEY.json` "
         "boxes parsed and mapped, on the decode thread whatever decoded the image. CPU ms per "
         "sample: the bench process's user + system time over the samples it decoded (median "
         "of the rounds); images/s: the best round.", "",
         "| decode path | run | CPU ms / sample | images/s |", "| --- | --- | ---: | ---: |"]
    for r in T["rows"]:
        cpu = f"{r['cpu_ms_per_sample']:.2f}" if r.get("cpu_ms_per_sample") else "-"
        L.append(f"| {r['path']} | {r['run']} | {cpu} | {r['img_per_s']:,.0f} |")
    cpu = {r["run"]: r for r in T["rows"] if r["path"].startswith("CPU")}
    base, mask, boxes = (cpu.get(name) for name, _ in TARGET_RUNS[:3])
    if base and mask and boxes and base.get("cpu_ms_per_sample"):
        L += ["", f"A mask adds {mask['cpu_ms_per_sample'] - base['cpu_ms_per_sample']:.2f} ms "
              f"of CPU per sample ({mask['cpu_ms_per_sample'] / base['cpu_ms_per_sample']:.2f}x "
              "the sample's without it: the image is DCT-scaled and decoded only over the crop's "
              "region, the mask's PNG is inflated whole); boxes add "
              f"{boxes['cpu_ms_per_sample'] - base['cpu_ms_per_sample']:.2f} ms. Where the GPU "
              "decodes the images the decode threads do the masks' work alone, so it bounds "
              "the rate before the GPU does."]
    return L + [""]


def report_shapes_gpu(R):
    """Issue 46's output shapes on every decode path: figures recorded from
    tools/gpu_shapes_check.sh on the GPU machine (not measured by this script)."""
    S = R["shapes_gpu"]

    def span(v):
        if not v:
            return "-"
        lo, hi = min(v), max(v)
        return f"{lo:,.0f}" if lo == hi else f"{lo:,.0f}-{hi:,.0f}"
    L = ["## Output shapes on the GPU paths (letterbox, center_pad, native, size buckets, "
         "multi-crop)", "",
         f"Measured on: {S['note']}. images/s, the range over the runs; every path decodes at "
         "full scale except the CPU schedule, which DCT-scales where the crop allows. The "
         "engines' column counts only the runs whose engines decoded at least 2,000 of the 4,800 "
         "images (the engines open on a thread of their own, and until then their share is "
         "decoded on the CPU: a run where they opened late measured mostly the CPU; in the "
         "multi-crop runs they took at most 838).", "",
         "| output | CPU schedule | kernels (`--gpu-decode`) | engines "
         "(`--hw-decode-percent 100`) | defaults (BALANCE) |", "| --- | ---: | ---: | ---: | ---: |"]
    for r in S["rows"]:
        L.append(f"| {r['shape']} | {span(r['cpu'])} | {span(r['kernels'])} | "
                 f"{span(r['engines'])} | {span(r['defaults'])} |")
    rows = {r["shape"]: r for r in S["rows"]}
    lb, mc = rows.get("letterbox 640 x 640"), rows.get("multi-crop, DINO's 2 x 224 + 6 x 96")

    def ratios(r):  # each run's kernels over the CPU schedule of the same call and round
        q = [k / c for k, c in zip(r["kernels"], r["cpu"])]
        return f"{min(q):.1f}-{max(q):.1f}x"
    if lb and mc and lb["cpu"] and lb["kernels"] and mc["cpu"] and mc["kernels"]:
        L += ["", f"The kernels run letterbox at {ratios(lb)} the CPU schedule's rate and "
              f"DINO's eight views at {ratios(mc)} (each run against the CPU schedule of the "
              "same call and round; one packet a sample for the views: their union decoded once, "
              "each view resized from it). With masks and boxes the decode threads' mask work "
              "(each `KEY.seg.png` inflated whole) bounds the kernels' runs, and the defaults "
              "vary with how far the controller moves its engines' share."]
    if S.get("engines_note"):  # what the engines' column was measured with, when it has changed
        L += ["", S["engines_note"]]
    return L + [""]


def write_report(R, out):
    """performance.md and its plots from the results R, into `out` (and the text on stdout)."""
    plots = Plots(out)
    L = report_head(R)
    if "ringfeed" in R:
        L += report_side(R, plots)
    if "restart" in R:
        L += report_restart(R, plots)
    if "photos_dense" in R:
        L += photos_report(R["photos_dense"], plots.loaders)
    if "photos" in R:
        L += photos_report(R["photos"], plots.loaders)
    if "scaling" in R:
        L += report_scaling(R, plots)
    L += report_machines(R)
    if "train" in R:
        L += report_train(R)
    if "ddp" in R:
        L += report_ddp(R)
    if "tokens" in R:
        L += report_tokens(R)
    if "order" in R:
        L += report_order(R)
    if "memory" in R:
        L += report_memory(R)
    if "raw" in R:
        L += report_raw(R)
    if "reliability" in R:
        L += report_reliability(R)
    if "soak" in R:
        L += report_soak(R, plots)
    if "multicrop" in R:
        L += report_multicrop(R)
    if "targets" in R:
        L += report_targets(R)
    if "shapes_gpu" in R:
        L += report_shapes_gpu(R)
    open(os.path.join(out, "performance.md"), "w").write("\n".join(L) + "\n")
    print("\n".join(L))


if __name__ == "__main__":
    main()
