"""ringfeed-bench's page-cache hit ratio says what came from storage. On shards written by
Python's tarfile and by GNU tar (no .idx, so create scans their headers), evicted with
posix_fadvise(DONTNEED), one epoch reports cache_hit_ratio below 0.1 with either I/O engine, and
the same epoch run again right after reports above 0.9. Skipped, with the reason, where it
cannot be measured: no per-thread I/O accounting (storage_measured 0), an eviction that leaves
pages resident, io_uring refused."""
import ctypes
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from conftest import REPO, find_tool, make_shards

sys.path.insert(0, os.path.join(REPO, "tools"))
import perf_report  # noqa: E402

PER_SHARD = 150

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
PROT_READ, MAP_SHARED, MAP_FAILED = 1, 1, ctypes.c_void_p(-1).value


def resident_bytes(path):
    """Bytes of the file in the page cache (mincore over a mapping that touches no page)."""
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
    finally:
        os.close(fd)
    assert addr != MAP_FAILED, os.strerror(ctypes.get_errno())
    try:
        vec = ctypes.create_string_buffer((size + 4095) // 4096)
        assert _libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
        return 4096 * sum(b & 1 for b in vec.raw)
    finally:
        _libc.munmap(addr, size)


def evict(paths):
    """perf_report's eviction (DONTNEED), checked: skip where pages stay resident."""
    perf_report.evict(paths)
    left = {p: resident_bytes(p) for p in paths}
    if any(left.values()):
        pytest.skip(f"posix_fadvise(DONTNEED) left pages resident here: {left}")


def is_gnu_tar(tar):
    out = subprocess.run([tar, "--version"], capture_output=True, text=True)
    return out.returncode == 0 and "GNU tar" in out.stdout


@pytest.fixture(scope="module")
def user_shards(tmp_path_factory, lib):
    """Two shards of the same kind of samples: one written by tarfile, one by GNU tar."""
    src = make_shards(str(tmp_path_factory.mktemp("gen")), 2 * PER_SHARD, 10, PER_SHARD,
                      seed=3, max_side=320)
    first, second = sorted(glob.glob(src))
    out = tmp_path_factory.mktemp("user")
    with tarfile.open(first) as s, tarfile.open(out / "train-0.tar", "w") as d:
        for m in s:
            info = tarfile.TarInfo(m.name)
            info.size = m.size
            d.addfile(info, io.BytesIO(s.extractfile(m).read()))
    tar = shutil.which("tar")
    if not tar or not is_gnu_tar(tar):
        pytest.skip("GNU tar not found")
    files = out / "files"
    files.mkdir()
    with tarfile.open(second) as s:
        names = [m.name for m in s]
        s.extractall(files, filter="data")
    subprocess.run([tar, "--format=gnu", "-cf", str(out / "train-1.tar"), "-C", str(files)]
                   + names, check=True)
    shutil.rmtree(files)
    return sorted(glob.glob(str(out / "train-*.tar")))


def bench(shards, engine, *extra):
    exe = find_tool("tools", "ringfeed-bench", "RINGFEED_BENCH")
    if exe is None:
        pytest.skip("ringfeed-bench not found (build it, or set RINGFEED_BENCH)")
    pattern = os.path.join(os.path.dirname(shards[0]), "train-*.tar")
    p = subprocess.run([exe, "--shards", pattern, "--io", engine, "--device", "host", "--size",
                        "32", "--batch", "16", "--threads", "2", "--json", *extra],
                       capture_output=True, text=True)
    if p.returncode != 0 and engine == "uring" and "io_uring" in p.stderr:
        pytest.skip(f"io_uring refused here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    if r.get("storage_measured") == 0:
        pytest.skip(f"bytes read from storage not measured here: {r['storage_why']}")
    return r


@pytest.mark.parametrize("engine", ["pread", "uring"])
def test_cold_epoch_then_repeated_epoch(user_shards, engine):
    evict(user_shards)
    cold = bench(user_shards, engine, "--evict")
    assert cold["images"] == 2 * PER_SHARD
    assert cold["cache_hit_ratio"] < 0.1, cold
    assert cold["per_epoch"][0]["cache_hit_ratio"] < 0.1
    # Every byte came from storage (create's header scan too), whatever was resident at submit.
    size = sum(os.path.getsize(p) for p in user_shards)
    assert cold["storage_read_bytes"] >= min(size, cold["bytes_read"])
    assert 0 <= cold["resident_at_submit_ratio"] <= 1
    warm = bench(user_shards, engine)
    assert warm["cache_hit_ratio"] > 0.9, warm
    assert warm["per_epoch"][0]["cache_hit_ratio"] > 0.9


def test_first_batch_breakdown(user_shards):
    """The JSON splits the first batch at its hand-out: rf_loader_next returned it before it
    was on the device (first_batch_ms), and the counters just after it say what the loader had
    decoded and read by then: at least that batch, from the shards."""
    r = bench(user_shards, "pread")
    f = r["first_batch"]
    assert 0 < f["next_ms"] <= r["first_batch_ms"] <= f["loader_ms"]
    assert f["decoded"] >= 16 and f["gpu_decoded"] == f["hw_decoded"] == 0  # the host backend
    assert 0 < f["bytes_read"] <= r["bytes_read"]
    assert f["decode_busy_ms"] > 0 and f["consumer_wait_ms"] <= f["next_ms"] + 1
