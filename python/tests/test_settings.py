"""The settings table (rf_config_settings) against the binding and the bench made from it: the
ctypes mirror is the table's, every setting has a Python keyword (an argument of its own or one
of its name) and a ringfeed-bench flag, the Python defaults are the library's but where the
binding chooses otherwise on purpose, and a value out of a setting's range is refused naming
it. Walks the rows, so a new setting is covered by its row alone."""
import ctypes
import inspect
import subprocess

import pytest

import ringfeed
from ringfeed import _capi as C
from ringfeed import _args as L
from conftest import find_tool

KW = dict(device="cpu", decode_threads=1, rank=0, world_size=1, array_type="numpy")
NO_FORM = C.RF_SETTING_HEADER | C.RF_SETTING_C_ONLY


def rows():
    table = ringfeed.settings()
    assert len(table) > 70
    return table.values()


def test_ctypes_mirror_is_the_table(lib):
    names = [s.name for s in rows()]
    assert [f[0] for f in C.RfConfig._fields_] == names
    for s in rows():
        assert getattr(C.RfConfig, s.name).offset == s.offset
        assert getattr(C.RfConfig, s.name).size == s.size
    cfg = C.config_init()
    assert cfg.struct_size == ctypes.sizeof(C.RfConfig) == C.layout_table()["rf_config"][0][2]


def test_config_init_holds_every_rows_default(lib):
    cfg = C.config_init()
    for s in rows():
        if s.flags & C.RF_SETTING_HEADER:
            continue
        v = getattr(cfg, s.name)
        if s.rule is not None:
            want = s.auto
        elif s.type == "str":
            want, v = s.default, v.decode() if v else None
        elif s.type in ("strs", "ptr", "func", "u32s", "f32s"):
            want, v = None, v or None
        else:
            want = s.default
        if s.type == "f32x3":
            v = tuple(v)
            want = (want,) * 3 if s.rule is not None else want
        elif s.type == "f32":
            want = ctypes.c_float(want).value
        assert v == want, s.name


def test_every_setting_has_a_python_keyword(lib):
    params = set(inspect.signature(ringfeed.Loader).parameters) | \
        set(inspect.signature(ringfeed.TokenLoader).parameters)
    generic = {s.name for s in L.keyword_settings()}
    for s in rows():
        if s.flags & NO_FORM:
            assert s.name not in generic and s.name not in L._FACES, s.name
            continue
        face = L._FACES.get(s.name)
        if face is None:
            assert s.name in generic and s.name not in params, s.name
            assert s.name in ringfeed.Loader.__doc__ and s.name in ringfeed.TokenLoader.__doc__
        else:
            assert face in params or hasattr(ringfeed.Loader, face), (s.name, face)
    assert not set(L._FACES) - {s.name for s in rows()}  # no face of a setting that is gone


def _other_value(s):
    """A valid value of setting s other than its default, as a keyword takes it."""
    if s.type == "bool":
        return not s.default
    if s.type == "enum":
        base = s.auto if s.rule is not None else s.default
        return s.values[(base + 1) % len(s.values)]
    if s.type in ("u32", "u64", "i32"):
        base = s.min if s.rule is not None else s.default
        return base + 1 if base + 1 <= s.max else base - 1
    if s.type == "f32":
        return (s.min + s.max) / 2
    if s.type == "str":  # the string settings that are keywords: boxes', keypoints', masks',
        # views', buckets'
        return {"box_ext": "boxes.npy", "keypoint_flip_pairs": "0:1", "mask": "xmask",
                "multi_crop": "2x16:0.2-1,3x8", "size_buckets": "24x16,16x24"}.get(s.name, "ann")
    if s.type == "f32x3":  # pad_value: a value of each channel's range
        return (s.min, s.max, s.min + 1)
    pytest.fail(f"{s.name}: no value for a {s.type} setting")


def test_every_keyword_setting_reaches_the_library(shards):
    """Each setting that is a keyword of its own name, given a value other than its default,
    is what the created loader's config reports."""
    for s in L.keyword_settings():
        if s.name in ("odirect", "staging_bytes", "naive"):
            continue  # O_DIRECT needs the file system's support; the others resize the run
        value = _other_value(s)
        extra = {"num_classes": 1000} if s.name == "multi_label" else {}  # multihot's width
        if s.name.startswith("box_"):  # boxes on: their rows' width, and a JSON path
            extra = {"max_boxes": 4, "box_json_path": "b"} if s.name != "box_ext" else \
                {"max_boxes": 4}
        if s.name.startswith("keypoint_"):
            extra = {"max_points": 4, "keypoint_json_path": "k"}
        if s.name == "size_buckets":  # letterboxed into each bucket
            extra = {"crop": "letterbox"}
        extra.pop(s.name, None)
        with ringfeed.Loader(shards, 8, size=24, **KW, **extra, **{s.name: value}) as ld:
            got = ld.config[s.name]
        if s.type == "f32x3":
            got, want = tuple(got), tuple(float(v) for v in value)
        else:
            want = C.choices(s.name)[value] if s.type == "enum" else \
                value if s.type in ("str", "f32") else int(value)
        assert got == pytest.approx(want) if s.type == "f32" else got == want, \
            (s.name, value, got)
    with ringfeed.Loader(shards, 8, size=24, **KW, naive=True) as ld:
        assert ld.config["naive"] == 1 and ld.config["prefetch_depth"] == 1
    with ringfeed.Loader(shards, 8, size=24, **KW, io_queue_depth=None) as ld:  # None: default
        assert ld.config["io_queue_depth"] == C.SETTINGS["io_queue_depth"].default


def test_python_defaults_are_the_librarys(shards):
    """What a Loader with every argument left at its default writes into rf_config is
    rf_config_init's default, but where the binding decides otherwise on purpose."""
    on_purpose = {
        "layout": "NCHW, PyTorch's convention",
        "decode_threads": "the CPUs divided by LOCAL_WORLD_SIZE (default_decode_threads)",
        "device_kind": "the device argument, resolved in Python",
        "epochs": "0: each iteration is one epoch, for as many as the loop asks",
        "rank": "RANK", "world_size": "WORLD_SIZE",
    }
    init = C.config_init()
    with ringfeed.Loader(shards, 8, device="cpu") as ld:
        given = dict(ld._cfg_fields)
    given.pop("batch_size")
    for name, v in given.items():
        if name in on_purpose:
            continue
        want = getattr(init, name)
        if isinstance(want, ctypes.Array):
            want = tuple(want)
        if isinstance(want, bytes):
            v = v if isinstance(v, bytes) else str(v).encode()
        if isinstance(want, float):
            want, v = want, ctypes.c_float(v).value
        assert v == want, (name, v, want)
    # TokenLoader's on purpose: int64 tokens (what nn.Embedding takes), prefetch_depth 4
    sig = inspect.signature(ringfeed.TokenLoader).parameters
    assert sig["dtype"].default == "int64" and sig["prefetch_depth"].default == 4
    sig = inspect.signature(ringfeed.Loader).parameters
    for kw, field in (("size", "image_size"), ("gpu_decode_percent", "gpu_decode_percent"),
                      ("hw_decode_percent", "hw_decode_percent"), ("seed", "seed"),
                      ("start_epoch", "start_epoch"), ("cache_bytes", "cache_bytes")):
        assert sig[kw].default == C.SETTINGS[field].default, kw
    for kw, field in (("crop", "crop"), ("on_error", "on_error"), ("dtype", "dtype"),
                      ("schedule", "decode_schedule")):
        assert sig[kw].default == C.SETTINGS[field].values[C.SETTINGS[field].default], kw
    assert sig["io_engine"].default == C.SETTINGS["io_engine"].values[0]  # AUTO
    assert ",".join(sig["image"].default) == C.SETTINGS["image_exts"].default


def test_keyword_settings_are_checked_by_their_row(shards):
    for s in L.keyword_settings():
        if s.type in ("u32", "u64", "i32") and s.max < C.TYPE_RANGES[s.type][1]:
            with pytest.raises(ValueError, match=f"^{s.name}={s.max + 1} is out of range"):
                ringfeed.Loader(shards, 8, **KW, **{s.name: s.max + 1})
        if s.type in ("u32", "u64", "i32") and s.min > 0:
            with pytest.raises(ValueError, match=f"^{s.name}=0 is out of range {s.min}.."):
                ringfeed.Loader(shards, 8, **KW, **{s.name: 0})
        if s.type == "enum":
            with pytest.raises(ValueError, match=f"{s.name} must be one of"):
                ringfeed.Loader(shards, 8, **KW, **{s.name: "no-such-value"})
    with pytest.raises(TypeError, match="io_queue_depth must be an integer"):
        ringfeed.Loader(shards, 8, **KW, io_queue_depth=8.5)
    # a setting with an argument of its own is not a keyword of its name, nor is a C hook
    for name in ("image_size", "next_timeout_ms", "sample_hook", "no_such_setting"):
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{name}'"):
            ringfeed.Loader(shards, 8, **KW, **{name: 1})
        with pytest.raises(TypeError, match=f"TokenLoader.*'{name}'"):
            ringfeed.TokenLoader(shards, 2, 8, 4, **KW, **{name: 1})


def _bench():
    exe = find_tool("tools", "ringfeed-bench", "RINGFEED_BENCH")
    if exe is None:
        pytest.skip("ringfeed-bench not found (build it, or set RINGFEED_BENCH)")
    return exe


def test_every_setting_has_a_bench_flag(lib):
    text = subprocess.run([_bench(), "--help"], capture_output=True, text=True,
                          check=True).stdout
    for s in rows():
        flag = "--" + s.name.replace("_", "-")
        if s.flags & C.RF_SETTING_C_ONLY:
            assert f"  {flag} " not in text, s.name
        elif not s.flags & (C.RF_SETTING_HEADER | C.RF_SETTING_INPUT):
            assert f"\n  {flag}" in text and s.doc in " ".join(text.split()), s.name


def test_bench_flags_reach_the_library(shards):
    p = subprocess.run([_bench(), "--shards", shards, "--device", "host", "--size", "16",
                        "--batch", "4", "--threads", "1", "--show-config", "--io-queue-depth",
                        "8", "--warm", "--numa", "off", "--order", "shard", "--shard-window",
                        "2", "--dtype", "float32", "--mean", "1,2,3", "--max-scans", "99"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    config = " ".join(line[len("config  "):] for line in p.stdout.splitlines()
                      if line.startswith("config  "))
    for want in ("io_queue_depth 8", "warm 1", "numa off", "order shard", "shard_window 2",
                 "dtype float32", "mean 1,2,3", "std 58.395,57.12,57.375", "max_scans 99",
                 "batch_size 4", "image_size 16", "decode_threads 1"):
        assert want in config, (want, config)
    for s in rows():
        if not s.flags & (NO_FORM | C.RF_SETTING_INPUT):
            assert f" {s.name} " in f" {config} ", s.name
    for bad, says in ((["--io-queue-depth", "5000"], "--io-queue-depth: 5000"),
                      (["--crop", "middle"], "--crop: middle"), (["--mean", "1,2"], "--mean"),
                      (["--batch", "0"], "--batch: 0"), (["--epochs", "0"], "--epochs")):
        p = subprocess.run([_bench(), "--shards", shards] + bad, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 2 and says in p.stderr, (bad, p.stderr)
