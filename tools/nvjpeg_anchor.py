#!/usr/bin/env python3
"""nvjpeg_anchor.py — what the GPU's hardware JPEG decoders (NVJPG engines) give when nvJPEG is
called directly, beside which ringfeed's hw_decode_percent path is measured (docs/gpu-decode.md).

Reads the baseline JPEGs of tar shards into pinned host memory once, then decodes them with
nvJPEG's hardware backend to planar output (NVJPEG_OUTPUT_UNCHANGED, what ringfeed asks for)
in GPU memory, in a list of configurations, each for --seconds:

  batched W xT [sorted] [prealloc]   nvjpegDecodeBatched of W images per call from T threads,
                                     each with its own decode state and CUDA stream; "sorted":
                                     every call's images of one chroma subsampling; "prealloc":
                                     nvjpegDecodeBatchedPreAllocate first (nvImageCodec does)
  single xT                          the decoupled per-image API with a hardware decoder
                                     (nvjpegDecodeJpegHost / TransferToDevice / Device), one
                                     image at a time on each of T threads
  class C                            batched 64 x4 on the images of one subsampling only

Each line: img/s, Mpix/s, the host time of one call (median), and the engines' utilization
(nvidia-smi dmon's jpg column, mean over the run's seconds). Needs torch (memory, streams) and
libnvjpeg (RINGFEED_NVJPEG or libnvjpeg.so.13). Prints a JSON line per configuration; --json
FILE writes them all.

  python3 tools/nvjpeg_anchor.py --shards 'data/dense-*.tar' --seconds 3
"""
import argparse
import ctypes as C
import glob
import json
import os
import statistics
import subprocess
import tarfile
import threading
import time

CSS = {0: "4:4:4", 1: "4:2:2", 2: "4:2:0", 3: "4:4:0", 4: "4:1:1", 5: "4:1:0", 6: "gray"}
BACKEND_HARDWARE, OUTPUT_UNCHANGED, OUTPUT_RGBI = 3, 0, 5


class Image(C.Structure):  # nvjpegImage_t
    _fields_ = [("channel", C.c_void_p * 4), ("pitch", C.c_size_t * 4)]


def load_nvjpeg():
    names = [os.environ.get("RINGFEED_NVJPEG"), "libnvjpeg.so.13", "libnvjpeg.so"]
    for n in filter(None, names):
        try:
            return C.CDLL(n)
        except OSError:
            continue
    raise SystemExit("nvjpeg_anchor: libnvjpeg could not be loaded (set RINGFEED_NVJPEG)")


def check(st, what):
    if st != 0:
        raise RuntimeError(f"{what}: nvJPEG status {st}")


def baseline_sof0(data):
    """True when the file's frame header is SOF0 (what the engines take) and it has one scan."""
    pos, scans, sof = 2, 0, None
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return False
        m = data[pos + 1]
        if m == 0xFF:
            pos += 1
            continue
        n = int.from_bytes(data[pos + 2:pos + 4], "big")
        if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
            sof = m
        if m == 0xDA:
            scans += 1
            return sof == 0xC0 and scans == 1
        pos += 2 + n
    return False


def read_files(pattern, limit):
    out = []
    for shard in sorted(glob.glob(pattern)):
        with tarfile.open(shard) as tf:
            for m in tf:
                if m.isfile() and m.name.endswith(".jpg"):
                    d = tf.extractfile(m).read()
                    if baseline_sof0(d):
                        out.append(d)
                        if len(out) >= limit:
                            return out
    return out


class Dmon:
    """nvidia-smi dmon -s u in the background: the mean of its jpg column while running."""

    def __init__(self):
        try:
            self.p = subprocess.Popen(["nvidia-smi", "dmon", "-s", "u", "-d", "1"],
                                      stdout=subprocess.PIPE, text=True)
        except OSError:
            self.p = None
        self.lines = []
        if self.p:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line)

    def mark(self):
        return len(self.lines)

    def jpg_since(self, mark):
        head = next((l for l in self.lines if l.startswith("#") and "jpg" in l), None)
        if not head:
            return None
        col = head.lstrip("#").split().index("jpg")
        vals = []
        for l in self.lines[mark:]:
            f = l.split()
            if l.startswith("#") or len(f) <= col or not f[col].isdigit():
                continue
            vals.append(int(f[col]))
        return statistics.mean(vals) if vals else None

    def stop(self):
        if self.p:
            self.p.terminate()


def pin_files(torch, files):
    """The files in one pinned buffer, as ringfeed's pinned slots hold them, each on a 64-byte
    boundary: the buffer (keep it), its address and each file's offset."""
    offs, total = [], 0
    for d in files:
        offs.append(total)
        total += (len(d) + 63) // 64 * 64
    pinned = torch.empty(total, dtype=torch.uint8).pin_memory()
    base = pinned.data_ptr()
    for d, o in zip(files, offs):
        C.memmove(base + o, d, len(d))
    return pinned, base, offs


def image_infos(nj, h, base, offs, files):
    """Per file, from nvJPEG's header parse: its chroma subsampling, the planes of its planar
    output (pitch rounded to 64 bytes, rows) and its pixels."""
    info = []
    for d, o in zip(files, offs):
        nc, css = C.c_int(), C.c_int()
        ws, hs = (C.c_int * 4)(), (C.c_int * 4)()
        check(nj.nvjpegGetImageInfo(h, C.c_void_p(base + o), C.c_size_t(len(d)), C.byref(nc),
                                    C.byref(css), ws, hs), "nvjpegGetImageInfo")
        planes = [((ws[c] + 63) // 64 * 64, hs[c]) for c in range(nc.value)]
        info.append({"css": css.value, "planes": planes, "px": ws[0] * hs[0]})
    return info


def describe(files, info, engines, cores):
    """The first JSON line: the engines and the set (size, density, subsampling mix)."""
    mean_kb = sum(map(len, files)) / len(files) / 1e3
    mix = {}
    for i in info:
        mix[CSS.get(i["css"], str(i["css"]))] = mix.get(CSS.get(i["css"], str(i["css"])), 0) + 1
    print(json.dumps({"engines": engines, "cores_per_engine": cores,
                      "files": len(files), "mean_kb": round(mean_kb, 1),
                      "mean_kpx": round(sum(i["px"] for i in info) / len(info) / 1e3, 1),
                      "bytes_per_px": round(sum(map(len, files)) / sum(i["px"] for i in info), 3),
                      "sampling": mix}), flush=True)


def run_configs(run, batched, single, info):
    """Every configuration of the docstring, in order (run skips those --configs leaves out)."""
    plain = list(range(len(info)))
    by_css = sorted(plain, key=lambda k: (info[k]["css"], k))
    for w, t in [(7, 1), (7, 4), (14, 4), (32, 1), (32, 4), (64, 4), (128, 2), (256, 1),
                 (256, 2), (256, 4)]:
        run(f"batched {w} x{t}", t, batched(w, t, plain))
    for w, t in [(32, 4), (256, 1), (256, 4)]:
        run(f"batched {w} x{t} sorted", t, batched(w, t, by_css))
    for w, t in [(32, 4), (256, 4)]:
        run(f"batched {w} x{t} prealloc", t, batched(w, t, plain, prealloc=True))
    for t in (7, 14):
        run(f"single x{t}", t, single(t))
    for css, name in CSS.items():
        ks = [k for k in plain if info[k]["css"] == css]
        if len(ks) >= 64:
            run(f"class {name}", 4, batched(64, 4, ks))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", required=True)
    ap.add_argument("--images", type=int, default=4096, help="baseline files to load at most")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--configs", default="all", help="comma list of name prefixes to run")
    ap.add_argument("--json", help="write every configuration's result here")
    a = ap.parse_args()
    import torch
    nj = load_nvjpeg()
    files = read_files(a.shards, a.images)
    if not files:
        raise SystemExit(f"nvjpeg_anchor: no baseline JPEG in {a.shards}")
    h = C.c_void_p()
    check(nj.nvjpegCreateEx(BACKEND_HARDWARE, None, None, 0, C.byref(h)), "nvjpegCreateEx")
    engines, cores = C.c_uint(), C.c_uint()
    nj.nvjpegGetHardwareDecoderInfo(h, C.byref(engines), C.byref(cores))
    pinned, base, offs = pin_files(torch, files)
    info = image_infos(nj, h, base, offs, files)
    describe(files, info, engines.value, cores.value)
    plane_bytes = max(sum(w * hh for w, hh in i["planes"]) for i in info)
    dmon = Dmon()
    results = []

    def image_of(k, out_base):
        im, at = Image(), out_base
        for c, (w, hh) in enumerate(info[k]["planes"]):
            im.channel[c], im.pitch[c] = at, w
            at += w * hh
        return im

    def run(name, threads, work):
        """work(t, stop) runs on thread t until stop is set and returns (images, call_ms)."""
        if a.configs != "all" and not any(name.startswith(p) for p in a.configs.split(",")):
            return
        torch.cuda.synchronize()
        stop, res = threading.Event(), [None] * threads

        def body(t):
            try:
                res[t] = work(t, stop)
            except Exception as e:  # reported as the configuration's result
                res[t] = e
                stop.set()
        ths = [threading.Thread(target=body, args=(t,)) for t in range(threads)]
        mark = dmon.mark()
        t0 = time.perf_counter()
        for t in ths:
            t.start()
        time.sleep(a.seconds)
        stop.set()
        for t in ths:
            t.join()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        err = next((r for r in res if isinstance(r, Exception)), None)
        if err:
            results.append({"config": name, "error": str(err)})
            print(json.dumps(results[-1]), flush=True)
            return
        n = sum(r[0] for r in res)
        px = sum(r[2] for r in res)
        calls = [c for r in res for c in r[1]]
        r = {"config": name, "img_per_s": round(n / dt), "mpix_per_s": round(px / dt / 1e6, 1),
             "call_ms": round(statistics.median(calls), 2) if calls else None,
             "jpg_util": dmon.jpg_since(mark)}
        results.append(r)
        print(json.dumps(r), flush=True)

    def batched(width, threads, order, prealloc=False):
        def work(t, stop):
            st = C.c_void_p()
            check(nj.nvjpegJpegStateCreate(h, C.byref(st)), "nvjpegJpegStateCreate")
            if prealloc:
                check(nj.nvjpegDecodeBatchedPreAllocate(h, st, width, 1400, 1400, 0, OUTPUT_RGBI),
                      "nvjpegDecodeBatchedPreAllocate")
            stream = torch.cuda.Stream()
            out = torch.empty(width * plane_bytes, dtype=torch.uint8, device="cuda")
            data = (C.c_void_p * width)()
            lens = (C.c_size_t * width)()
            imgs = (Image * width)()
            n, calls, px, pos = 0, [], 0, t * width * 7919
            while not stop.is_set():
                for j in range(width):
                    k = order[(pos + j) % len(order)]
                    data[j], lens[j] = base + offs[k], len(files[k])
                    imgs[j] = image_of(k, out.data_ptr() + j * plane_bytes)
                    px += info[k]["px"]
                pos += width
                c0 = time.perf_counter()
                check(nj.nvjpegDecodeBatchedInitialize(h, st, width, 1, OUTPUT_UNCHANGED), "init")
                check(nj.nvjpegDecodeBatched(h, st, data, lens, imgs,
                                             C.c_void_p(stream.cuda_stream)), "batched")
                calls.append((time.perf_counter() - c0) * 1e3)
                stream.synchronize()
                n += width
            nj.nvjpegJpegStateDestroy(st)
            return n, calls, px
        return work

    def single(threads):
        def work(t, stop):
            dec, st, js, prm = C.c_void_p(), C.c_void_p(), C.c_void_p(), C.c_void_p()
            pb, db = C.c_void_p(), C.c_void_p()
            check(nj.nvjpegDecoderCreate(h, BACKEND_HARDWARE, C.byref(dec)), "DecoderCreate")
            check(nj.nvjpegDecoderStateCreate(h, dec, C.byref(st)), "DecoderStateCreate")
            check(nj.nvjpegBufferPinnedCreate(h, None, C.byref(pb)), "BufferPinnedCreate")
            check(nj.nvjpegBufferDeviceCreate(h, None, C.byref(db)), "BufferDeviceCreate")
            check(nj.nvjpegStateAttachPinnedBuffer(st, pb), "AttachPinned")
            check(nj.nvjpegStateAttachDeviceBuffer(st, db), "AttachDevice")
            check(nj.nvjpegJpegStreamCreate(h, C.byref(js)), "JpegStreamCreate")
            check(nj.nvjpegDecodeParamsCreate(h, C.byref(prm)), "DecodeParamsCreate")
            check(nj.nvjpegDecodeParamsSetOutputFormat(prm, OUTPUT_UNCHANGED), "SetOutputFormat")
            stream = torch.cuda.Stream()
            s = C.c_void_p(stream.cuda_stream)
            out = torch.empty(plane_bytes, dtype=torch.uint8, device="cuda")
            n, calls, px, k = 0, [], 0, t * 7919
            while not stop.is_set():
                i = k % len(files)
                k += 1
                c0 = time.perf_counter()
                check(nj.nvjpegJpegStreamParse(h, C.c_void_p(base + offs[i]),
                                               C.c_size_t(len(files[i])), 0, 0, js), "Parse")
                check(nj.nvjpegDecodeJpegHost(h, dec, st, prm, js), "DecodeJpegHost")
                check(nj.nvjpegDecodeJpegTransferToDevice(h, dec, st, js, s), "Transfer")
                im = image_of(i, out.data_ptr())
                check(nj.nvjpegDecodeJpegDevice(h, dec, st, C.byref(im), s), "DecodeJpegDevice")
                calls.append((time.perf_counter() - c0) * 1e3)
                stream.synchronize()
                n += 1
                px += info[i]["px"]
            return n, calls, px
        return work

    try:
        run_configs(run, batched, single, info)
    finally:
        dmon.stop()
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
