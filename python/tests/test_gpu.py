"""GPU tests: zero copy, stream ordering, normalization, two ranks under torchrun.
Skipped without torch, a GPU, or a CUDA build of libringfeed."""
import ctypes
import os
import subprocess
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ringfeed  # noqa: E402
from ringfeed import _capi as C  # noqa: E402
from conftest import N_IMAGES, HERE, PACKAGE_ROOT  # noqa: E402
from test_encodings import LOSSLESS  # noqa: E402
from test_encodings import base, reference  # noqa: E402,F401 (fixtures)
from test_badfiles import PATHS as BAD_PATHS, bench_recovered, check_paths  # noqa: E402
from test_badfiles import check_recovered  # noqa: E402
from test_badfiles import bad_shard, recovered_shard  # noqa: E402,F401 (fixtures)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device visible to torch")


@pytest.fixture(scope="module", autouse=True)
def cuda_build(lib):
    if C.cuda_device_count() == 0:
        pytest.skip("libringfeed was built without CUDA or sees no device")


# schedule="cpu": these tests check the copy and conversion of CPU-decoded batches against the
# host backend's, whatever the default schedule; the balancing scheduler is checked by
# tests/test_cuda.c (balance_schedule_plain_equals_host) and test_balance_schedule_matches_host
# below.
KW = dict(size=32, decode_threads=4, seed=21, schedule="cpu")


def host_reference(shards, batch=4, **kw):
    with ringfeed.Loader(shards, batch, device="cpu", copy=True, array_type="numpy", **KW,
                         **kw) as ld:
        return [(np.array(b.images), np.array(b.labels), b.keys) for b in ld]


def pool_handle(ptr):
    """cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE): the memory pool an
    allocation came from (0 for cudaMalloc memory such as torch's caching allocator)."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        pytest.skip("libcuda.so.1 not loadable")
    out = ctypes.c_void_p()
    rc = cu.cuPointerGetAttribute(ctypes.byref(out), ctypes.c_int(17), ctypes.c_uint64(ptr))
    assert rc == 0, f"cuPointerGetAttribute: {rc}"
    return out.value or 0


def test_zero_copy_device_pointer(shards):
    with ringfeed.Loader(shards, 4, device="cuda:0", **KW) as ld:
        it = iter(ld)
        next(it)  # warm up torch's allocator for the labels
        before = torch.cuda.memory_allocated(0)
        b = next(it)
        after = torch.cuda.memory_allocated(0)
        raw = b._lease.ptr.contents
        assert raw.device_kind == C.RF_DEVICE_CUDA
        assert b.images.is_cuda and b.images.device == torch.device("cuda", 0)
        assert b.images.data_ptr() == raw.data, "images are a view of the loader's buffer"
        # torch allocated only the int64 labels, not the images
        assert after - before < b.images.numel()
        # the buffer belongs to a stream-ordered memory pool (the loader's), not to torch
        assert pool_handle(raw.data) != 0
        assert pool_handle(b.labels.data_ptr()) == 0 or \
            pool_handle(b.labels.data_ptr()) != pool_handle(raw.data)
        assert b.labels.dtype == torch.int64 and b.labels.is_cuda


def test_contents_match_host_backend(shards):
    ref = host_reference(shards)
    with ringfeed.Loader(shards, 4, device="cuda", **KW) as ld:
        got = [(b.images.cpu().numpy(), b.labels.cpu().numpy(), b.keys) for b in ld]
    assert len(got) == len(ref)
    for (gi, gl, gk), (ri, rl, rk) in zip(got, ref):
        assert gk == rk
        np.testing.assert_array_equal(gl, rl)
        np.testing.assert_array_equal(gi, ri)


def test_gpu_decode_matches_host_backend(restart_shards):
    """gpu_decode=True: the kernels' batches equal the host backend's run of the same code."""
    kw = dict(size=96, decode_threads=4, seed=21, gpu_decode=True)
    with ringfeed.Loader(restart_shards, 8, device="cpu", copy=True, array_type="numpy",
                         **kw) as ld:
        ref = [(np.array(b.images), b.keys) for b in ld]
    with ringfeed.Loader(restart_shards, 8, device="cuda", **kw) as ld:
        got = [(b.images.cpu().numpy(), b.keys) for b in ld]
        assert ld.stats()["gpu_decoded"] > 0
    assert len(got) == len(ref)
    for (gi, gk), (ri, rk) in zip(got, ref):
        assert gk == rk
        np.testing.assert_array_equal(gi, ri)


def test_hw_decode_matches_host_backend_within_rounding(shards):
    """hw_decode_percent=100 on the GPU's hardware JPEG decoders (skipped on a GPU without
    them or without libnvjpeg): the same keys and labels as the host backend's run of the same
    packets, pixels within the engine's IDCT rounding (tests/test_cuda.c bounds it tighter).
    The engines open beside the first batches, which the CPU decodes meanwhile; once they are
    ready the later epochs' images go to them."""
    kw = dict(size=96, decode_threads=4, seed=21, hw_decode_percent=100)
    with ringfeed.Loader(shards, 8, device="cpu", copy=True, array_type="numpy", **kw) as ld:
        ref = [(np.array(b.images), b.keys, np.array(b.labels)) for b in ld]
    try:
        ld = ringfeed.Loader(shards, 8, device="cuda", **kw)
    except ringfeed.RingfeedError as e:
        if "RINGFEED_NVJPEG" in os.environ:
            raise
        pytest.skip(str(e))
    with ld:
        got = [(b.images.cpu().numpy(), b.keys, b.labels.cpu().numpy()) for b in ld]
        for _ in range(3000):  # the opener, started with the first batch: at most 30 s
            if ld.stats()["hw_engines"] != C.RF_HW_ENGINES_OPENING:
                break
            time.sleep(0.01)
        engines = ld.stats()["hw_engines"]
        if engines == C.RF_HW_ENGINES_NONE and "RINGFEED_NVJPEG" not in os.environ:
            pytest.skip("rf_stats.hw_engines NONE: this GPU has no hardware JPEG decoder")
        assert engines == C.RF_HW_ENGINES_READY
        # the ring (8 batches) was filled before READY; the 3 epochs after it are 21 batches
        for _ in range(3):
            for b in ld:
                pass
        assert ld.stats()["hw_decoded"] >= N_IMAGES
    assert len(got) == len(ref)
    for (gi, gk, gl), (ri, rk, rl) in zip(got, ref):
        assert gk == rk
        np.testing.assert_array_equal(gl, rl)
        d = np.abs(gi.astype(np.int16) - ri.astype(np.int16))
        assert d.max() <= 12 and d.mean() <= 0.25, (d.max(), d.mean())


def test_stream_ordering_under_slow_consumer(shards):
    """The consumer's stream is made slow (a GPU spin before it reads each batch) while the
    host loop races ahead: the batch is released on that stream when the next one is
    requested, so the pool must not hand the memory to a later copy before the slow read ran.
    Sums of what the GPU read must equal the host reference."""
    ref = host_reference(shards)
    side = torch.cuda.Stream()
    sums = []
    with ringfeed.Loader(shards, 4, device="cuda", prefetch_depth=2, **KW) as ld:
        with torch.cuda.stream(side):
            for images, labels in ld:
                torch.cuda._sleep(20_000_000)  # ~10 ms of spinning on `side`
                sums.append(images.to(torch.int64).sum(dim=(1, 2, 3)))
        torch.cuda.synchronize()
    want = [r[0].astype(np.int64).sum(axis=(1, 2, 3)) for r in ref]
    assert len(sums) == len(want)
    for s, w in zip(sums, want):
        np.testing.assert_array_equal(s.cpu().numpy(), w)


def test_kept_batch_on_device(shards):
    ref = host_reference(shards)
    with ringfeed.Loader(shards, 4, device="cuda", prefetch_depth=3, **KW) as ld:
        it = iter(ld)
        kept = next(it).keep()
        next(it)
        torch.cuda._sleep(5_000_000)
        np.testing.assert_array_equal(kept.images.cpu().numpy(), ref[0][0])
        kept.release()
        assert len(list(it)) == len(ld) - 2


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_normalization_matches_torch(shards, dtype, layout):
    ref = host_reference(shards, layout=layout)
    mean, std = ringfeed.IMAGENET_MEAN, ringfeed.IMAGENET_STD
    try:
        ld = ringfeed.Loader(shards, 4, device="cuda", dtype=dtype, mean=mean, std=std,
                             layout=layout, **KW)
        batches = [(b.images.clone(), b.keys) for b in ld]
    except RuntimeError as e:
        if "does not support that output type" in str(e):
            pytest.skip(str(e))
        raise
    ld.close()
    tdt = getattr(torch, dtype)
    shape = (1, 3, 1, 1) if layout == "NCHW" else (1, 1, 1, 3)
    m = torch.tensor(mean, device="cuda").view(shape)
    s = torch.tensor(std, device="cuda").view(shape)
    for (img, keys), (r, _, rk) in zip(batches, ref):
        assert keys == rk and img.dtype == tdt
        want = ((torch.from_numpy(r).cuda().float() - m) / s)
        tol = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
        torch.testing.assert_close(img.float(), want.to(tdt).float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("schedule", ["auto", "balance"])
def test_two_ranks_torchrun_disjoint(shards, labels_by_key, tmp_path, schedule):
    """Two torchrun ranks on one GPU, each its own loader: disjoint samples covering the
    dataset, the same count each, with the default schedule and with the balancing one (two
    processes opening the hardware decoders and launching kernels at once)."""
    script = os.path.join(HERE, "gpu_two_rank.py")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           script, "--shards", shards, "--out", str(tmp_path), "--schedule", schedule]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    ranks = []
    for rank in range(2):
        with open(tmp_path / f"rank{rank}.txt") as f:
            ranks.append([ln.split() for ln in f.read().split("\n") if ln])
    keys = [set(k for k, lab, pad in rows if pad == "0") for rows in ranks]
    assert not keys[0] & keys[1], "ranks must see disjoint samples"
    assert keys[0] | keys[1] == set(labels_by_key)
    for rows in ranks:
        for k, lab, pad in rows:
            assert labels_by_key[k] == int(lab)
    assert len(ranks[0]) == len(ranks[1]), "every rank gets the same number of samples"


def test_cuda_paths_give_the_full_scale_pixels_on_photos(photos):
    """On the GPU: the kernels and the hardware decoders (when libnvjpeg is there) give
    exactly the CPU's full-scale pixels on crops of real photographs of every size."""
    from test_photos import check_every_path
    ringfeed.loader._find_nvjpeg()
    check_every_path(photos, "cuda", hw=bool(os.environ.get("RINGFEED_NVJPEG")))


@pytest.mark.parametrize("name", list(LOSSLESS))
def test_cuda_paths_on_every_encoding(base, reference, name):
    """test_encodings' lossless rewrites of real photo crops (progressive, arithmetic, restart
    intervals, non-interleaved scans, trailers, EXIF orientation ...) on the GPU: the kernels
    and the hardware decoders (when libnvjpeg is there) give the plain file's full-scale CPU
    batches whatever the encoding (needs jpegtran: carry it beside cjpeg, docs/gpu.md)."""
    from test_encodings import check_rewrite
    ringfeed.loader._find_nvjpeg()
    check_rewrite(base, reference, name, "cuda", hw=bool(os.environ.get("RINGFEED_NVJPEG")))


def test_balance_schedule_matches_host(shards):
    """schedule="balance" on a CUDA device (also what no setting gives): every image is decoded
    at full scale wherever it goes, so the batches are the host backend's CPU run with
    dct_scaling=False (within the hardware decoders' IDCT rounding when they took samples);
    with dct_scaling="always" the crops the CPU DCT-scales stay on the CPU, and the batches
    are the CPU run's with its default."""
    kw = dict(size=96, decode_threads=4, seed=21)
    with ringfeed.Loader(shards, 8, device="cpu", copy=True, array_type="numpy",
                         dct_scaling=False, **kw) as ld:
        ref = [(np.array(b.images), b.keys) for b in ld]
    with ringfeed.Loader(shards, 8, device="cuda", **kw) as ld:
        assert ld.stats()["decode_schedule"] == C.RF_SCHEDULE_BALANCE
        assert ld.config["prefetch_depth"] == 8
    check_balance(shards, ref, kw)
    with ringfeed.Loader(shards, 8, device="cpu", copy=True, array_type="numpy", **kw) as ld:
        ref = [(np.array(b.images), b.keys) for b in ld]
    check_balance(shards, ref, dict(kw, dct_scaling="always"))


def check_balance(shards, ref, kw):
    with ringfeed.Loader(shards, 8, device="cuda", schedule="balance", **kw) as ld:
        got = [(b.images.cpu().numpy(), b.keys) for b in ld]
        st = ld.stats()
    assert st["decode_schedule"] == C.RF_SCHEDULE_BALANCE
    assert len(got) == len(ref)
    for (gi, gk), (ri, rk) in zip(got, ref):
        assert gk == rk
        d = np.abs(gi.astype(np.int16) - ri.astype(np.int16))
        assert d.max() <= (2 if st["hw_decoded"] else 0)


def test_bad_files_get_the_cpus_verdicts_on_cuda(bad_shard):
    """test_badfiles.py on the GPU: the kernels' and the engines' verdicts come with their
    batches (late), the engines' bad Huffman codes are decided by the CPU on the consumer's
    thread, and the balancing scheduler (the defaults) routes samples by timing: every path
    delivers and skips the CPU schedule's samples in every epoch."""
    check_paths(bad_shard, "cuda", dict(BAD_PATHS, defaults={}))


def test_files_libjpeg_recovers_from_on_cuda(recovered_shard):
    """test_badfiles.py's recovered files on the GPU: every path delivers them with their clean
    twin's pixels (within the engines' rounding where they took one twin), and counts them
    once, the packets' when their batch is handed out."""
    check_recovered(recovered_shard, "cuda", dict(BAD_PATHS, defaults={}))
    bench_recovered(recovered_shard, "cuda", ([], ["--gpu-decode"], ["--hw-decode", "100"],
                                              ["--schedule", "cpu"]))
