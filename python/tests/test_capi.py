"""The ctypes mirrors match the C structs (sizes written by the C init functions)."""
import ctypes

import pytest

import ringfeed
from ringfeed import _capi as C


def test_config_size_matches_c(lib):
    cfg = C.RfConfig()
    lib.rf_config_init(ctypes.byref(cfg))
    assert cfg.struct_size == ctypes.sizeof(C.RfConfig)
    assert cfg.version == C.RF_CONFIG_VERSION
    # defaults the header documents
    assert cfg.world_size == 1
    assert abs(cfg.scale_min - 0.08) < 1e-6 and cfg.flip_prob < 0
    assert list(cfg.std) == [1.0, 1.0, 1.0]


def test_stats_size_matches_c(lib):
    st = C.RfStats()
    lib.rf_stats_init(ctypes.byref(st))
    assert st.struct_size == ctypes.sizeof(C.RfStats)


def test_batch_size_matches_c(shards):
    with ringfeed.Loader(shards, 4, size=16, device="cpu", decode_threads=1) as ld:
        b = next(iter(ld))
        assert b._lease.ptr.contents.struct_size == ctypes.sizeof(C.RfBatch)


def test_config_field_offsets_are_natural():
    # The header only uses fixed-width fields in an order without hidden padding surprises;
    # these anchors catch a field inserted in the middle of the mirror.
    assert C.RfConfig.shards.offset == 8
    assert C.RfConfig.seed.offset % 8 == 0
    assert C.RfConfig.resume_state.offset % 8 == 0
    assert C.RfBatch.data.offset == 24
    assert C.RfStats.io_engine.offset == 16


def test_strerror_and_version(lib):
    assert ringfeed.version().count(".") == 2
    assert "shard" in C.strerror(C.RF_ENOFILES)
    assert C.strerror(-2)  # -errno goes through strerror
    e = C.RingfeedError(C.RF_EFORMAT, "x.tar: bad header at 512")
    assert e.code == C.RF_EFORMAT and e.name == "RF_EFORMAT"
    assert "x.tar: bad header at 512" in str(e)


def test_cuda_status_says_why(lib):
    # Queried in a child: the CUDA runtime is initialized there only (pytest keeps running
    # other tests in this process).
    import os
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        n, why = ringfeed.cuda_status()
        os.write(w, f"{n}|{ringfeed.cuda_device_count()}|{why}".encode())
        os._exit(0)
    os.close(w)
    out = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(pid, 0)
    n, count, why = out.split("|", 2)
    assert n == count and why
    if n == "0":
        assert any(k in why for k in ("no NVIDIA driver", "too old", "no CUDA device",
                                      "failed to initialize", "no CUDA backend")), why


def test_fork_child_gets_efork(shards):
    # The loader belongs to its creator: in a fork() child every call raises RF_EFORK (no hang
    # on threads that do not exist there), and closing it there returns; the parent carries on.
    import os
    with ringfeed.Loader(shards, 4, size=16, device="cpu", decode_threads=1) as ld:
        it = iter(ld)
        first = next(it)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                next(it)
            except C.RingfeedError as e:
                code = 0 if e.code == C.RF_EFORK and "fork()" in str(e) else 2
            except BaseException:
                code = 3
            try:
                ld.close()
            except BaseException:
                code = code or 4
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        del first
        assert sum(1 for _ in it) >= 1  # the parent goes on with its epoch
    assert C.strerror(C.RF_EFORK).startswith("loader used from a fork() child")
