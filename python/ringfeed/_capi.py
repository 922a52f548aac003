"""ctypes mirror of include/ringfeed.h: the shared library, its structs, constants, prototypes.

Everything the binding knows about the C side is in this one module. The structs mirror the
header field by field (order and fixed-width types); rf_config's mirror, RfConfig, is made when
the library is loaded, from its settings table (rf_config_settings: every field's name, type,
offset, default and range), which SETTINGS keeps for the keyword arguments' checks. The library
is loaded when ringfeed is imported: its rf_version() must be the version this binding was
written for, and every field's name, offset and size in each mirror is checked against the
library's own table (rf_abi_layout); a mismatch raises ImportError naming the library and what
differs, instead of corrupting memory later. ringfeed's error codes (RF_EINVAL, ...) come from
that table too: the module-level names are filled from the library, not copied here.
"""
import ctypes
import ctypes.util
import glob
import os
import re

# ---- constants (ringfeed.h) ------------------------------------------------------------------

RF_CONFIG_VERSION = 1
RF_EPOCH_END = 1
RF_DONE = 2

# ringfeed's own error codes (RF_EINVAL, ...) are not listed here: they are module attributes
# filled from the library's table when it is loaded, at import (see _errors below).

RF_DEVICE_AUTO, RF_DEVICE_HOST, RF_DEVICE_CUDA = 0, 1, 2
RF_IO_AUTO, RF_IO_URING, RF_IO_PREAD = 0, 1, 2
RF_CROP_RANDOM, RF_CROP_CENTER, RF_CROP_LETTERBOX, RF_CROP_CENTER_PAD, RF_CROP_NATIVE = range(5)
RF_LAYOUT_NHWC, RF_LAYOUT_NCHW = 0, 1
RF_DTYPE_UINT8 = 0
RF_DTYPE_INT32 = 1
RF_DTYPE_INT64 = 2
RF_DTYPE_UINT16 = 3
RF_DTYPE_FLOAT16 = 4
RF_DTYPE_BFLOAT16 = 5
RF_DTYPE_FLOAT32 = 6
RF_ORDER_GLOBAL, RF_ORDER_NONE, RF_ORDER_SHARD = 0, 1, 2
RF_SOURCE_TAR, RF_SOURCE_FOLDER, RF_SOURCE_TOKENS = 0, 1, 2
RF_WINDOWS_RANDOM, RF_WINDOWS_SEQUENTIAL = 0, 1
RF_REMAINDER_PAD, RF_REMAINDER_DROP = 0, 1
RF_DCT_SCALING_AUTO, RF_DCT_SCALING_OFF, RF_DCT_SCALING_ON = 0, 1, 2
# enum rf_decode_schedule
RF_SCHEDULE_AUTO, RF_SCHEDULE_CPU, RF_SCHEDULE_MANUAL, RF_SCHEDULE_BALANCE = 0, 1, 2, 3
# enum rf_hw_engines (rf_stats.hw_engines)
RF_HW_ENGINES_NONE, RF_HW_ENGINES_OPENING, RF_HW_ENGINES_READY, RF_HW_ENGINES_UNOPENED = 0, 1, 2, 3
RF_LABEL_CLS, RF_LABEL_NONE, RF_LABEL_JSON = 0, 1, 2
# rf_setting.flags
RF_SETTING_HEADER, RF_SETTING_INPUT, RF_SETTING_C_ONLY, RF_SETTING_TOKENS = 1, 2, 4, 8

# name -> (enum value, element bytes)
DTYPES = {
    "uint8": (RF_DTYPE_UINT8, 1),
    "int32": (RF_DTYPE_INT32, 4),
    "int64": (RF_DTYPE_INT64, 8),
    "uint16": (RF_DTYPE_UINT16, 2),
    "float16": (RF_DTYPE_FLOAT16, 2),
    "bfloat16": (RF_DTYPE_BFLOAT16, 2),
    "float32": (RF_DTYPE_FLOAT32, 4),
}
DTYPE_NAMES = {v[0]: k for k, v in DTYPES.items()}

# ---- structs ---------------------------------------------------------------------------------

c_float3 = ctypes.c_float * 3


class RfField(ctypes.Structure):
    """One extra field of a batch (rf_field): sample i's bytes at data + offsets[i], lengths[i]
    long."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("data", ctypes.c_void_p),
        ("offsets", ctypes.POINTER(ctypes.c_uint64)),
        ("lengths", ctypes.POINTER(ctypes.c_uint32)),
    ]


class RfView(ctypes.Structure):
    """One view of a batch's samples (rf_view, multi_crop): sample i's at data + i *
    sample_stride, shape[1:] of the batch's dtype; its crop boxes and flips, and its masks,
    boxes and keypoints (each laid out as the batch's own for one crop), on the host."""
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("sample_stride", ctypes.c_uint64),
        ("shape", ctypes.c_int64 * 4),
        ("crop_boxes", ctypes.POINTER(ctypes.c_int32)),
        ("flips", ctypes.POINTER(ctypes.c_uint8)),
        ("masks", ctypes.c_void_p),
        ("boxes", ctypes.POINTER(ctypes.c_float)),
        ("box_classes", ctypes.POINTER(ctypes.c_int32)),
        ("box_counts", ctypes.POINTER(ctypes.c_uint32)),
        ("points", ctypes.POINTER(ctypes.c_float)),
        ("point_counts", ctypes.POINTER(ctypes.c_uint32)),
        ("letterbox", ctypes.POINTER(ctypes.c_float)),
    ]


class RfBatch(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("count", ctypes.c_uint32),
        ("epoch", ctypes.c_uint64),
        ("index", ctypes.c_uint64),
        ("data", ctypes.c_void_p),
        ("data_bytes", ctypes.c_uint64),
        ("shape", ctypes.c_int64 * 4),
        ("dtype", ctypes.c_uint32),
        ("layout", ctypes.c_uint32),
        ("device_kind", ctypes.c_uint32),
        ("device_index", ctypes.c_int32),
        ("labels", ctypes.POINTER(ctypes.c_int32)),
        ("labels_device", ctypes.c_void_p),
        ("keys", ctypes.POINTER(ctypes.c_char_p)),
        ("sample_ids", ctypes.POINTER(ctypes.c_uint64)),
        ("positions", ctypes.POINTER(ctypes.c_uint64)),
        ("is_padding", ctypes.POINTER(ctypes.c_uint8)),
        ("event", ctypes.c_void_p),
        ("ndim", ctypes.c_uint32),
        ("nfields", ctypes.c_uint32),
        ("fields", ctypes.POINTER(RfField)),
        ("crop_boxes", ctypes.POINTER(ctypes.c_int32)),
        ("flips", ctypes.POINTER(ctypes.c_uint8)),
        ("label_multihot", ctypes.POINTER(ctypes.c_uint8)),
        ("label_list", ctypes.POINTER(ctypes.c_int32)),
        ("label_counts", ctypes.POINTER(ctypes.c_uint32)),
        ("boxes", ctypes.POINTER(ctypes.c_float)),
        ("box_classes", ctypes.POINTER(ctypes.c_int32)),
        ("box_counts", ctypes.POINTER(ctypes.c_uint32)),
        ("points", ctypes.POINTER(ctypes.c_float)),
        ("point_counts", ctypes.POINTER(ctypes.c_uint32)),
        ("letterbox", ctypes.POINTER(ctypes.c_float)),
        ("sizes", ctypes.POINTER(ctypes.c_uint32)),
        ("sample_offsets", ctypes.POINTER(ctypes.c_uint64)),
        ("masks", ctypes.c_void_p),
        ("mask_dtype", ctypes.c_uint32),
        ("nviews", ctypes.c_uint32),
        ("views", ctypes.POINTER(RfView)),
        ("bucket", ctypes.c_uint32),
        ("bucket_height", ctypes.c_uint32),
        ("bucket_width", ctypes.c_uint32),
    ]


class RfStats(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("io_threads", ctypes.c_uint32),
        ("decode_threads", ctypes.c_uint32),
        ("prefetch_depth", ctypes.c_uint32),
        ("io_engine", ctypes.c_char * 16),
        ("io_engine_why", ctypes.c_char * 160),
        ("device", ctypes.c_char * 32),
        ("registered_buffers", ctypes.c_uint32),
        ("pinned", ctypes.c_uint32),
        ("samples_delivered", ctypes.c_uint64),
        ("batches_delivered", ctypes.c_uint64),
        ("samples_decoded", ctypes.c_uint64),
        ("bytes_read", ctypes.c_uint64),
        ("reads", ctypes.c_uint64),
        ("read_retries", ctypes.c_uint64),
        ("io_busy_ns", ctypes.c_uint64),
        ("decode_busy_ns", ctypes.c_uint64),
        ("copy_busy_ns", ctypes.c_uint64),
        ("consumer_wait_ns", ctypes.c_uint64),
        ("wall_ns", ctypes.c_uint64),
        ("epoch", ctypes.c_uint64),
        ("pinned_bytes", ctypes.c_uint64),
        ("dct_scaled", ctypes.c_uint64),
        ("skipped", ctypes.c_uint64),
        ("skipped_by_reason", ctypes.c_uint64 * 16),  # RF_SKIP_REASONS
        ("nonregular_members", ctypes.c_uint64),
        ("cache_checked_bytes", ctypes.c_uint64),
        ("cache_hit_bytes", ctypes.c_uint64),
        ("warmed_bytes", ctypes.c_uint64),
        ("odirect", ctypes.c_uint32),
        ("hugepages", ctypes.c_uint32),
        ("numa_node", ctypes.c_int32),
        ("numa_nodes", ctypes.c_uint32),
        ("device_pool_reserved_bytes", ctypes.c_uint64),
        ("device_pool_used_bytes", ctypes.c_uint64),
        ("device_allocs_after_create", ctypes.c_uint64),
        ("host_allocs_after_create", ctypes.c_uint64),
        ("ring_register_ns", ctypes.c_uint64),
        ("memory_why", ctypes.c_char * 192),
        ("region_decoded", ctypes.c_uint64),
        ("gpu_decoded", ctypes.c_uint64),
        ("hw_decoded", ctypes.c_uint64),
        ("storage_read_bytes", ctypes.c_uint64),
        ("storage_measured", ctypes.c_uint32),
        ("storage_why", ctypes.c_char * 128),
        ("resume_epoch", ctypes.c_uint64),
        ("counted_epoch", ctypes.c_uint64),
        ("epoch_delivered", ctypes.c_uint64),
        ("epoch_skipped", ctypes.c_uint64),
        ("epoch_skipped_by_reason", ctypes.c_uint64 * 16),  # RF_SKIP_REASONS
        ("epoch_total", ctypes.c_uint64),
        ("epoch_final", ctypes.c_uint32),
        ("gpu_plain_decoded", ctypes.c_uint64),
        ("decode_schedule", ctypes.c_uint32),
        ("sched_gpu_permille", ctypes.c_uint32),
        ("sched_hw_permille", ctypes.c_uint32),
        ("hw_engines", ctypes.c_uint32),
        ("hw_open_ns", ctypes.c_uint64),
        ("remote_requests", ctypes.c_uint64),
        ("remote_retries", ctypes.c_uint64),
        ("remote_bytes", ctypes.c_uint64),
        ("shard_cache_on", ctypes.c_uint32),
        ("shard_cache_hits", ctypes.c_uint64),
        ("shard_cache_misses", ctypes.c_uint64),
        ("shard_cache_stale", ctypes.c_uint64),
        ("shard_cache_bypasses", ctypes.c_uint64),
        ("shard_cache_fills", ctypes.c_uint64),
        ("shard_cache_fill_requests", ctypes.c_uint64),
        ("shard_cache_fill_failures", ctypes.c_uint64),
        ("shard_cache_bytes_written", ctypes.c_uint64),
        ("shard_cache_evictions", ctypes.c_uint64),
        ("shard_cache_why", ctypes.c_char * 512),
        ("hw_engines_why", ctypes.c_char * 256),
        ("remote_create_requests", ctypes.c_uint64),
        ("remote_create_bytes", ctypes.c_uint64),
        ("shard_cache_corrupt", ctypes.c_uint64),
        ("recovered", ctypes.c_uint64),
        ("recovered_by_kind", ctypes.c_uint64 * 8),  # RF_RECOVERED_KINDS
        ("sync_indexed", ctypes.c_uint64),
        ("sync_stale", ctypes.c_uint64),
        ("sync_built", ctypes.c_uint64),
        ("sync_loaded", ctypes.c_uint64),
    ]


class RfFieldLayout(ctypes.Structure):
    """One row of rf_abi_layout's table (rf_field_layout)."""
    _fields_ = [
        ("struct_name", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("offset", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("align", ctypes.c_uint64),
        ("value", ctypes.c_int64),
    ]


class RfSetting(ctypes.Structure):
    """One row of rf_config_settings' table (rf_setting)."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("doc", ctypes.c_char_p),
        ("unit", ctypes.c_char_p),
        ("stage", ctypes.c_char_p),
        ("values", ctypes.c_char_p),
        ("rule", ctypes.c_char_p),
        ("default_str", ctypes.c_char_p),
        ("offset", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("type", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("min", ctypes.c_uint64),
        ("max", ctypes.c_uint64),
        ("default_int", ctypes.c_uint64),
        ("auto_int", ctypes.c_uint64),
        ("min_f", ctypes.c_double),
        ("max_f", ctypes.c_double),
        ("default_f", ctypes.c_double),
        ("auto_f", ctypes.c_double),
    ]


# The C struct each mirror stands for, as rf_abi_layout names it; "rf_config" is added when the
# library is loaded (RfConfig is made from its settings table).
class RfSampleView(ctypes.Structure):
    """What rf_config.sample_hook is handed for one decoded sample (rf_sample_view): the
    staged pixels with their strides, the sample's ids, key and label, and its extra fields."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("layout", ctypes.c_uint32),
        ("height", ctypes.c_uint32),
        ("width", ctypes.c_uint32),
        ("channels", ctypes.c_uint32),
        ("is_padding", ctypes.c_uint32),
        ("pixels", ctypes.c_void_p),
        ("row_stride", ctypes.c_uint64),
        ("pixel_stride", ctypes.c_uint64),
        ("channel_stride", ctypes.c_uint64),
        ("sample_id", ctypes.c_uint64),
        ("position", ctypes.c_uint64),
        ("epoch", ctypes.c_uint64),
        ("seed", ctypes.c_uint64),
        ("key", ctypes.c_char_p),
        ("label", ctypes.POINTER(ctypes.c_int32)),
        ("nfields", ctypes.c_uint32),
        ("field_names", ctypes.POINTER(ctypes.c_char_p)),
        ("field_data", ctypes.POINTER(ctypes.c_void_p)),
        ("field_lengths", ctypes.POINTER(ctypes.c_uint32)),
    ]


# rf_sample_hook: int (*)(const rf_sample_view *view, void *ctx)
SAMPLE_HOOK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(RfSampleView), ctypes.c_void_p)

MIRRORS = {"rf_batch": RfBatch, "rf_field": RfField, "rf_stats": RfStats,
           "rf_setting": RfSetting, "rf_sample_view": RfSampleView, "rf_view": RfView}
RfConfig = None  # made by lib()
SETTINGS = {}  # rf_config's settings by name (Setting), filled by lib()


# ---- errors ----------------------------------------------------------------------------------


class RingfeedError(RuntimeError):
    """An error returned by libringfeed.

    `code` is the C return code (negative: RF_E* or -errno), `name` its symbolic name when it
    is one of ringfeed's own, and `detail` the text of rf_last_error() (shard, member, byte
    offset, decoder message) at the time of the failure. str(e) holds all of it.
    """

    def __init__(self, code, detail="", what=""):
        self.code = int(code)
        self.detail = detail or ""
        self.name = error_name(self.code)
        text = strerror(self.code)
        head = f"{what}: " if what else ""
        tag = f" [{self.name}]" if self.name else f" [{self.code}]"
        msg = f"{head}{text}{tag}"
        if self.detail:
            msg += f": {self.detail}"
        super().__init__(msg)


class LoaderTimeout(RingfeedError, TimeoutError):
    """No batch within the loader's `timeout` (RF_ETIMEDOUT). Not sticky: the pipeline keeps
    working and the next call waits again; str(e) says where it stands."""


def error_name(code):
    """The symbolic name of one of ringfeed's own codes ("RF_EFORMAT"), "" for any other."""
    name = lib().rf_err_name(int(code))
    return name.decode() if name else ""


# ---- the shared library ----------------------------------------------------------------------

_lib = None


def _candidates():
    """Where libringfeed may be, in the documented order."""
    env = os.environ.get("RINGFEED_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for pat in ("libringfeed.so", "libringfeed.so.*"):
        yield from sorted(glob.glob(os.path.join(here, pat)))
    # The build tree of a source checkout: <repo>/build*/libringfeed.so, where this file is
    # <repo>/python/ringfeed/_capi.py. Most recently built first.
    repo = os.path.dirname(os.path.dirname(here))
    trees = glob.glob(os.path.join(repo, "build*", "libringfeed.so"))
    yield from sorted(trees, key=lambda p: os.path.getmtime(p), reverse=True)
    found = ctypes.util.find_library("ringfeed")
    if found:
        yield found


def library_path():
    """The path libringfeed is (or would be) loaded from, or None."""
    if _lib is not None:
        return _lib._name
    for p in _candidates():
        if os.sep not in p or os.path.exists(p):
            return p
    return None


def lib():
    """Load libringfeed once, declare every prototype and check that it is the library this
    binding was written for (version, then every struct's layout); ringfeed's __init__ calls it
    at import, so a mismatch is an ImportError there and never memory corruption later."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        try:
            _declare(handle)
        except AttributeError as e:  # a function this package calls is not in the library
            raise ImportError(f"{path}: {e}: the library is older than the Python package "
                              "(rebuild it, or point RINGFEED_LIB at a newer one)") from e
        check_version(handle.rf_version().decode("utf-8", "replace"), path)
        table = layout_table(handle)
        check_struct(RfSetting, "rf_setting", table, path)
        settings = settings_table(handle)
        config = config_struct(settings)
        MIRRORS["rf_config"] = config
        for c_name, cls in MIRRORS.items():
            check_struct(cls, c_name, table, path)
        _declare_config(handle, config)
        globals().update(_errors(table), SETTINGS=settings, RfConfig=config)
        _lib = handle
        return _lib
    hint = "; ".join(tried) if tried else "no candidate found"
    raise ImportError(
        "cannot load libringfeed: set RINGFEED_LIB to the library's path, install the package "
        "with `pip install .` (which puts the library inside it), or build it in "
        "<repo>/build*/ (cmake -S . -B build && make -C build ringfeed). Tried: " + hint)


# The header's version lines, as pyproject.toml's version provider reads them.
_HEADER_VERSION = re.compile(r"#define RF_VERSION_MAJOR (\d+)\s+#define RF_VERSION_MINOR (\d+)"
                             r"\s+#define RF_VERSION_PATCH (\d+)")


def _binding_version():
    """The libringfeed version this binding was written for: ringfeed/_version.py, which the
    wheel build writes from include/ringfeed.h, or in a source checkout (no _version.py) that
    header itself, two folders above this package."""
    try:
        from ._version import __version__
        return __version__
    except ImportError:
        pass
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    header = os.path.join(repo, "include", "ringfeed.h")
    try:
        with open(header, encoding="utf-8") as f:
            m = _HEADER_VERSION.search(f.read())
    except OSError as e:
        raise ImportError(f"ringfeed: no ringfeed/_version.py (the package was not installed "
                          f"by pip) and no source checkout's header ({e}): install it with "
                          "`pip install .` at the repository root") from e
    if m is None:
        raise ImportError(f"{header}: no RF_VERSION_MAJOR/MINOR/PATCH lines")
    return ".".join(m.groups())


BINDING_VERSION = _binding_version()


def check_version(lib_version, path="libringfeed"):
    """Raise ImportError unless the library's rf_version() is BINDING_VERSION: a library of
    another release may lay out its structs or behave differently. The message names the
    library, both versions and the remedies."""
    if lib_version != BINDING_VERSION:
        here = os.path.dirname(os.path.abspath(__file__))
        raise ImportError(
            f"{path}: libringfeed {lib_version} does not match the ringfeed Python package "
            f"{BINDING_VERSION} ({here}); the library and the binding must come from the same "
            "release: reinstall the package (`pip install .` builds and bundles its own "
            "library), rebuild the library from the same checkout, or point RINGFEED_LIB at "
            "the matching library (or unset it)")


def _declare(L):
    P = ctypes.POINTER
    vp, i32, u64, cp = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_char_p
    protos = {
        "rf_loader_next": (i32, [vp, P(P(RfBatch))]),
        "rf_loader_release": (i32, [vp, P(RfBatch), vp]),
        "rf_batch_wait": (i32, [P(RfBatch), vp]),
        "rf_batch_synchronize": (i32, [P(RfBatch)]),
        "rf_loader_destroy": (None, [vp]),
        "rf_loader_stop": (i32, [vp]),
        "rf_loader_cancel": (i32, [vp]),
        "rf_last_error": (cp, [vp]),
        "rf_strerror": (cp, [i32]),
        "rf_err_name": (cp, [i32]),
        "rf_recovered_name": (cp, [ctypes.c_uint32]),
        "rf_skip_reason_name": (cp, [ctypes.c_uint32]),
        "rf_abi_layout": (P(RfFieldLayout), [P(ctypes.c_uint32)]),
        "rf_config_settings": (P(RfSetting), [P(ctypes.c_uint32)]),
        "rf_version": (cp, []),
        "rf_loader_batches_per_epoch": (u64, [vp]),
        "rf_loader_num_samples": (u64, [vp]),
        "rf_loader_set_epoch": (i32, [vp, u64]),
        "rf_loader_state": (i32, [vp, vp, u64, P(u64)]),
        "rf_stats_init": (None, [P(RfStats)]),
        "rf_loader_stats": (i32, [vp, P(RfStats)]),
        "rf_cuda_device_count": (i32, []),
        "rf_cuda_status": (i32, [cp, ctypes.c_size_t]),
        "rf_loader_trim": (i32, [vp, u64]),
        "rf_cpu_count": (ctypes.c_uint32, []),
        "rf_jpeg_add_restarts": (i32, [ctypes.c_char_p, u64, ctypes.c_uint32, ctypes.c_uint32,
                                       P(vp), P(u64), cp, ctypes.c_size_t]),
        "rf_free": (None, [vp]),
        "rf_image_list_open": (i32, [cp, P(vp), cp, ctypes.c_size_t]),
        "rf_image_list_free": (None, [vp]),
        "rf_image_list_classes": (ctypes.c_uint32, [vp]),
        "rf_image_list_class_name": (cp, [vp, ctypes.c_uint32]),
    }
    _set_protos(L, protos)


def _set_protos(L, protos):
    for name, (res, args) in protos.items():
        fn = getattr(L, name)
        fn.restype = res
        fn.argtypes = args


def _declare_config(L, config):
    """The prototypes that take an rf_config, once its mirror `config` is made."""
    P, vp, i32 = ctypes.POINTER, ctypes.c_void_p, ctypes.c_int
    _set_protos(L, {
        "rf_config_init": (None, [P(config)]),
        "rf_loader_create": (i32, [P(config), P(vp), ctypes.c_char_p, ctypes.c_size_t]),
        "rf_loader_config": (i32, [vp, P(config)]),
    })


def image_list_classes(path):
    """The class names of the image folder or list file at path (bytes), in label order, as
    rf_image_list_open walks it (the folder source's own walker): a class folder's names are
    its sorted subfolders; a `path label` list has none ([]). Raises RingfeedError."""
    L = lib()
    handle = ctypes.c_void_p()
    err = ctypes.create_string_buffer(1024)
    rc = L.rf_image_list_open(path, ctypes.byref(handle), err, len(err))
    if rc != 0:
        raise RingfeedError(rc, err.value.decode("utf-8", "replace"), "rf_image_list_open")
    try:
        return [os.fsdecode(L.rf_image_list_class_name(handle, c))
                for c in range(L.rf_image_list_classes(handle))]
    finally:
        L.rf_image_list_free(handle)


# Limit on rf_abi_layout's rows: a table longer than this is not the library's.
LAYOUT_ROWS_MAX = 4096


def layout_table(handle=None):
    """rf_abi_layout's table as {struct name: [(field name, offset, size), ...]}, the struct's
    own row first as ("", 0, sizeof), error codes under "rf_error" as (name, value, 0)."""
    n = ctypes.c_uint32()
    rows = (handle or lib()).rf_abi_layout(ctypes.byref(n))
    if n.value > LAYOUT_ROWS_MAX:
        raise ImportError(f"rf_abi_layout lists {n.value} rows, more than {LAYOUT_ROWS_MAX}")
    table = {}
    for i in range(n.value):
        r = rows[i]
        third = r.value if r.struct_name == b"rf_error" else r.offset
        table.setdefault(r.struct_name.decode(), []).append((r.name.decode(), third, r.size))
    return table


def _describe(layout):
    return ", ".join(f"{name}@{off}+{size}" for name, off, size in layout)


def check_struct(cls, c_name, table, path="libringfeed"):
    """Raise ImportError unless the ctypes Structure `cls` has exactly the fields of C struct
    `c_name` in `table` (from layout_table): the same names in the same order, each at the same
    offset with the same size, and the same total size. The message names the struct, the first
    field that differs, and both layouts in full."""
    rows = table.get(c_name)
    if not rows:
        raise ImportError(f"{path}: rf_abi_layout has no struct {c_name}")
    lib_fields = rows[1:]
    mine = [(name, getattr(cls, name).offset, getattr(cls, name).size)
            for name, *_ in cls._fields_]
    diff = None
    for k in range(max(len(mine), len(lib_fields))):
        a = mine[k] if k < len(mine) else None
        b = lib_fields[k] if k < len(lib_fields) else None
        if a != b:
            diff = (f"field {k}: ctypes has {_describe([a]) if a else 'nothing'}, the library "
                    f"{_describe([b]) if b else 'nothing'}")
            break
    if diff is None and ctypes.sizeof(cls) != rows[0][2]:
        diff = f"size: ctypes {ctypes.sizeof(cls)} bytes, the library {rows[0][2]}"
    if diff is not None:
        raise ImportError(
            f"{path}: {c_name} does not match the binding's {cls.__name__} ({diff}); the "
            f"library and the Python package are from different versions. "
            f"ctypes {cls.__name__}: {_describe(mine)}. library {c_name}: {_describe(lib_fields)}")


# ---- the settings table ----------------------------------------------------------------------

# enum rf_setting_type: its name here, and the ctypes type of the field
SETTING_TYPES = {
    0: ("bool", ctypes.c_uint32), 1: ("u32", ctypes.c_uint32), 2: ("i32", ctypes.c_int32),
    3: ("u64", ctypes.c_uint64), 4: ("f32", ctypes.c_float), 5: ("f32x3", c_float3),
    6: ("enum", ctypes.c_uint32), 7: ("str", ctypes.c_char_p),
    8: ("strs", ctypes.POINTER(ctypes.c_char_p)), 9: ("ptr", ctypes.c_void_p),
    10: ("func", ctypes.c_void_p), 11: ("u32s", ctypes.POINTER(ctypes.c_uint32)),
    12: ("f32s", ctypes.POINTER(ctypes.c_float)),
}
# The values each integer type holds, whatever a setting's own range.
TYPE_RANGES = {"bool": (0, 1), "u32": (0, 2**32 - 1), "enum": (0, 2**32 - 1),
               "i32": (-2**31, 2**31 - 1), "u64": (0, 2**64 - 1)}


class Setting:
    """One setting of rf_config as the library's table describes it: `type` ("u32", "enum",
    "f32x3", ...), `default` (the fixed default, in Python terms: an int, a float, a tuple of 3
    floats, a str or None; None too where the default is a rule), `rule` (how create decides
    the default, else None), `auto` (the value that asks for the default), `min`/`max` (the
    valid range of a number), `values` (an enum's names, in value order), `unit`, `stage` (the
    folder of src/ that reads it), `doc` (one line) and `flags` (RF_SETTING_*)."""

    __slots__ = ("name", "type", "ctype", "doc", "unit", "stage", "values", "rule", "default",
                 "auto", "min", "max", "flags", "offset", "size")

    def __init__(self, row):
        text = lambda b: b.decode("utf-8") if b is not None else None  # noqa: E731
        self.name = text(row.name)
        self.type, self.ctype = SETTING_TYPES[row.type]
        self.doc, self.unit, self.stage = text(row.doc), text(row.unit), text(row.stage)
        self.values = tuple(text(row.values).split(",")) if row.values else ()
        self.rule = text(row.rule)
        self.flags, self.offset, self.size = int(row.flags), int(row.offset), int(row.size)
        self.default = self.auto = self.min = self.max = None
        if self.type in TYPE_RANGES:
            signed = self.type == "i32"
            self.default = _signed32(row.default_int) if signed else int(row.default_int)
            self.auto = int(row.auto_int)
            self.min, self.max = int(row.min), int(row.max)
        elif self.type in ("f32", "f32x3"):
            self.default, self.auto = float(row.default_f), float(row.auto_f)
            self.min, self.max = float(row.min_f), float(row.max_f)
            if self.type == "f32x3":
                self.default = (self.default,) * 3
        elif self.type == "str":
            self.default = text(row.default_str)
        if self.rule is not None:
            self.default = None

    def __repr__(self):
        return f"Setting({self.name}: {self.type}, default {self.default!r}, {self.doc})"


def _signed32(v):
    v = int(v) & 0xFFFFFFFF
    return v - 2**32 if v >= 2**31 else v


def settings_table(handle=None):
    """rf_config_settings' table as {field name: Setting}, in declaration order."""
    n = ctypes.c_uint32()
    rows = (handle or lib()).rf_config_settings(ctypes.byref(n))
    if n.value > LAYOUT_ROWS_MAX:
        raise ImportError(f"rf_config_settings lists {n.value} rows, more than "
                          f"{LAYOUT_ROWS_MAX}")
    return {s.name: s for s in (Setting(rows[i]) for i in range(n.value))}


def config_struct(settings):
    """The ctypes Structure of rf_config, one field per setting in the table's order."""
    fields = [(s.name, s.ctype) for s in settings.values()]
    return type("RfConfig", (ctypes.Structure,), {
        "_fields_": fields, "__doc__": "rf_config, made from rf_config_settings' table."})


def choices(name):
    """An enum setting's values by name: {"random": 0, "center": 1} for "crop"."""
    return {v: i for i, v in enumerate(SETTINGS[name].values)}


def _errors(table):
    """The module attributes of ringfeed's own error codes: RF_EINVAL = -1000, ..., and
    ERROR_NAMES (code -> name)."""
    codes = {name: value for name, value, _ in table.get("rf_error", [])}
    if "RF_EINVAL" not in codes:
        raise ImportError("rf_abi_layout lists no error codes")
    return dict(codes, ERROR_NAMES={v: k for k, v in codes.items()})


RF_JPEG_RESTART_KEPT = 1  # ringfeed_shards.h


def add_restarts(jpeg, interval=0, optimize=True):
    data = bytes(jpeg)
    out, n = ctypes.c_void_p(), ctypes.c_uint64()
    err = ctypes.create_string_buffer(512)
    rc = lib().rf_jpeg_add_restarts(data, len(data), int(interval), 1 if optimize else 0,
                                    ctypes.byref(out), ctypes.byref(n), err, ctypes.sizeof(err))
    if rc == RF_JPEG_RESTART_KEPT:  # a progressive file cut short: rewritten, its pixels change
        return data
    if rc:
        raise RingfeedError(rc, err.value.decode("utf-8", "replace"), "add_restarts")
    try:
        return ctypes.string_at(out.value, n.value)
    finally:
        lib().rf_free(out)


def skip_reasons():
    """enum rf_skip_reason's names in index order, as the library names them
    (rf_skip_reason_name, until the first index it names none for)."""
    names = []
    while (name := lib().rf_skip_reason_name(len(names))) is not None:
        names.append(name.decode())
    return tuple(names)


def strerror(code):
    return lib().rf_strerror(int(code)).decode("utf-8", "replace")


def version():
    return lib().rf_version().decode()


def cuda_device_count():
    return int(lib().rf_cuda_device_count())


def cpu_count():
    return int(lib().rf_cpu_count())


def cuda_status():
    """-> (usable device count, one sentence: why none, or what there is)."""
    buf = ctypes.create_string_buffer(512)
    n = int(lib().rf_cuda_status(buf, ctypes.sizeof(buf)))
    return n, buf.value.decode("utf-8", "replace")


def config_init():
    cfg = RfConfig()
    lib().rf_config_init(ctypes.byref(cfg))
    return cfg


def stats_init():
    st = RfStats()
    lib().rf_stats_init(ctypes.byref(st))
    return st
