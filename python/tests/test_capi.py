"""The ctypes mirrors match the C structs: every field against the library's rf_abi_layout
table (a mismatch is an ImportError at load), sizes against those the C init functions write;
the error codes come from the library."""
import ctypes
import os
import re

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


def _mirror_copy(cls, edit):
    """A new ctypes Structure with cls's fields after edit(list of (name, type))."""
    fields = list(cls._fields_)
    edit(fields)
    return type(cls.__name__, (ctypes.Structure,), {"_fields_": fields})


def test_mirrors_match_the_library_layout(lib):
    table = C.layout_table()
    for c_name, cls in C.MIRRORS.items():
        C.check_struct(cls, c_name, table)  # raises on any difference
        assert [f[0] for f in table[c_name][1:]] == [f[0] for f in cls._fields_]


def _swap(fields, a, b):
    i = [f[0] for f in fields].index(a)
    j = [f[0] for f in fields].index(b)
    fields[i], fields[j] = fields[j], fields[i]


@pytest.mark.parametrize("cls,c_name,a,b", [
    (C.RfConfig, "rf_config", "batch_size", "image_size"),  # two uint32 side by side
    (C.RfConfig, "rf_config", "scale_min", "flip_prob"),  # two floats apart
    (C.RfBatch, "rf_batch", "labels_device", "event"),  # two pointers
    (C.RfStats, "rf_stats", "samples_delivered", "epoch_total"),  # two uint64, far apart
])
def test_swapped_fields_of_one_size_are_caught(lib, cls, c_name, a, b):
    # Same total size, same offsets in use: the struct_size checks pass, the layout check not.
    swapped = _mirror_copy(cls, lambda f: _swap(f, a, b))
    assert ctypes.sizeof(swapped) == ctypes.sizeof(cls)
    with pytest.raises(ImportError) as ei:
        C.check_struct(swapped, c_name, C.layout_table())
    msg = str(ei.value)
    assert c_name in msg and cls.__name__ in msg
    first = min([f[0] for f in cls._fields_].index(x) for x in (a, b))
    lib_field = cls._fields_[first][0]
    off = getattr(cls, lib_field).offset
    assert f"field {first}: ctypes has {swapped._fields_[first][0]}@{off}+" in msg, msg
    assert f"the library {lib_field}@{off}+" in msg, msg
    # both layouts in full
    assert f"library {c_name}: struct_size@0+4" in msg and f"ctypes {cls.__name__}: " in msg


def test_renamed_resized_missing_and_extra_fields_are_caught(lib):
    table = C.layout_table()

    def rename(f):
        f[3] = ("batch_sz", f[3][1])

    def resize(f):
        f[3] = (f[3][0], ctypes.c_uint64)

    edits = {"rename": rename, "resize": resize, "missing": lambda f: f.pop(),
             "extra": lambda f: f.append(("later", ctypes.c_uint32))}
    for what, edit in edits.items():
        with pytest.raises(ImportError, match="rf_config does not match"):
            C.check_struct(_mirror_copy(C.RfConfig, edit), "rf_config", table)
    with pytest.raises(ImportError, match="no struct rf_nothing"):
        C.check_struct(C.RfConfig, "rf_nothing", table)


def test_error_codes_come_from_the_library(lib):
    table = C.layout_table()["rf_error"]
    assert len(table) == 17
    for name, value, _ in table:
        assert getattr(C, name) == value
        assert C.error_name(value) == name == C.ERROR_NAMES[value]
        assert lib.rf_err_name(value).decode() == name
    assert C.RF_EINVAL == -1000 and C.RF_ETIMEDOUT == -1015 and C.RF_EHOOK == -1016
    assert C.error_name(-2) == "" and C.error_name(0) == "" and C.error_name(C.RF_DONE) == ""
    assert C.RingfeedError(-2).name == ""
    with pytest.raises(AttributeError):
        C.RF_ENOSUCHCODE


def test_enum_constants_match_the_header():
    # The enums' values the binding names (RF_SCHEDULE_*, RF_HW_ENGINES_*, ...) are those of
    # include/ringfeed.h, and every value of the enums stats() reports is named here.
    header = open(os.path.join(os.path.dirname(__file__), "..", "..", "include",
                               "ringfeed.h"), encoding="utf-8").read()
    enums = {m.group(1): dict((n, int(v)) for n, v in
                              re.findall(r"(RF_[A-Z0-9_]+)\s*=\s*(-?\d+)", m.group(2)))
             for m in re.finditer(r"enum (rf_\w+) \{([^}]*)\}", header)}
    assert {"rf_hw_engines", "rf_decode_schedule"} <= set(enums)
    named = 0
    for enum, values in enums.items():
        for const, value in values.items():
            if enum in ("rf_hw_engines", "rf_decode_schedule") or hasattr(C, const):
                assert getattr(C, const, None) == value, const
                named += 1
    assert named >= 7


def test_loading_a_mismatched_library_raises_import_error(lib, monkeypatch):
    # What a user with a library of another version sees: lib() (the first call that needs the
    # library) refuses it instead of handing out memory laid out differently.
    swapped = _mirror_copy(C.RfStats, lambda f: _swap(f, "reads", "read_retries"))
    monkeypatch.setattr(C, "_lib", None)
    monkeypatch.setitem(C.MIRRORS, "rf_stats", swapped)
    with pytest.raises(ImportError, match=r"rf_stats does not match the binding's RfStats "
                                          r"\(field 13: ctypes has read_retries@264\+8, "
                                          r"the library reads@264\+8\)"):
        C.lib()
    assert C._lib is None


def test_a_library_without_the_layout_table_is_refused(lib, monkeypatch):
    # A libringfeed built before rf_abi_layout existed: ImportError saying so, not an
    # AttributeError from ctypes.
    old = ctypes.CDLL(lib._name)
    monkeypatch.setattr(C, "_lib", None)
    monkeypatch.setattr(C, "_candidates", lambda: iter([lib._name]))
    monkeypatch.setattr(ctypes, "CDLL", lambda path: _Without(old, "rf_abi_layout"))
    with pytest.raises(ImportError, match="rf_abi_layout.*older than the Python package"):
        C.lib()


class _Without:
    """A loaded library that lacks one function."""

    def __init__(self, real, missing):
        self._real, self._missing = real, missing

    def __getattr__(self, name):
        if name == self._missing:
            raise AttributeError(f"undefined symbol: {name}")
        return getattr(self._real, name)
