"""Loader's and TokenLoader's own arguments as rf_config fields: the device, the element types,
size, labels, source kind, image extensions, the fields every loader shares (seed, rank, threads,
timeout, ...), the remote and cache settings, and the environment variables the binding reads
(RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, LOCAL_RANK, RINGFEED_NVJPEG). The checks of single values
and of the settings taken as keyword arguments of their own name are _args.py's.
"""
import math
import os

from . import _arrays
from . import _capi as C
from ._args import _choice, _field_int, _uint

# Enum arguments by their lower-case names (any case is accepted): the settings' own names in
# the library's table, and the binding's choices that are not one setting's.
_CROPS = C.choices("crop")
_LAYOUTS = C.choices("layout")
_IO_ENGINES = C.choices("io_engine")
_ON_ERROR = C.choices("on_error")
_ARRAY_TYPES = {"auto": "auto", "torch": "torch", "numpy": "numpy"}
_SOURCES = {"auto": "auto", "tar": "tar", "folder": "folder"}
_SCHEDULES = C.choices("decode_schedule")
_IMAGE_DTYPES = ("uint8", "float16", "bfloat16", "float32")
_TOKEN_DTYPES = ("uint16", "int32", "int64")


def _env_int(name, default):
    v = os.environ.get(name)
    if v in (None, ""):
        return default
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"environment variable {name}={v!r} is not an integer") from None


def _default_decode_threads():
    """cpu_count() shared among the LOCAL_WORLD_SIZE ranks of this machine (see
    ringfeed.default_decode_threads). The C library reads no environment variable."""
    ranks = _env_int("LOCAL_WORLD_SIZE", 1)
    if ranks < 1:
        raise ValueError(f"LOCAL_WORLD_SIZE={os.environ['LOCAL_WORLD_SIZE']!r}: need >= 1")
    return max(1, min(C.cpu_count() // ranks, C.SETTINGS["decode_threads"].max))


def _parse_device(device):
    """-> ("cpu", None) or ("cuda", index)."""
    if device is None or (isinstance(device, str) and device.lower() == "auto"):
        return ("cuda", None) if C.cuda_device_count() > 0 else ("cpu", None)
    torch = _arrays.torch_module()
    if torch is not None and isinstance(device, torch.device):
        device = str(device)
    if isinstance(device, int) and not isinstance(device, bool):
        return ("cuda", _field_int("device", device, "device_index", strict=True))
    if not isinstance(device, str):
        raise TypeError(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, not {device!r}")
    device = device.lower()
    if device == "cpu":
        return ("cpu", None)
    if device == "cuda":
        return ("cuda", None)
    if device.startswith("cuda:") and device[5:].isdigit():
        return ("cuda", _field_int("device", int(device[5:]), "device_index", strict=True))
    raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {device!r}")


def _dct_scaling(value):
    """dct_scaling= True (auto), False (off) or "always" (on) as rf_config.dct_scaling."""
    if isinstance(value, str):
        if value != "always":
            raise ValueError(f'dct_scaling must be True, False or "always", not {value!r}')
        return C.RF_DCT_SCALING_ON
    return C.RF_DCT_SCALING_AUTO if value else C.RF_DCT_SCALING_OFF


def _size_fields(size):
    """The rf_config fields of size=224 (image_size: square) or size=(h, w) (image_height and
    image_width, each 1..8192 as the library allows, so that a 0 never silently means AUTO)."""
    if isinstance(size, (tuple, list)):
        if len(size) != 2:
            raise ValueError(f"size must be an integer or (height, width), not {size!r}")
        h, w = (_field_int(f"size[{i}]", v, "image_height", strict=True)
                for i, v in enumerate(size))
        return {"image_height": h, "image_width": w}
    return {"image_size": _field_int("size", size, "image_size")}


def _dtype_name(value, allowed, what="dtype"):
    """The element type's name ("bfloat16") from a string in any case, a torch dtype
    (torch.bfloat16) or anything numpy.dtype() takes (np.float32, np.dtype("uint8"))."""
    name = None
    if isinstance(value, str):
        name = value.lower()
    elif type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        name = str(value).rpartition(".")[2]  # "torch.bfloat16" (torch is not imported here)
    elif _arrays.np is not None:
        try:
            name = _arrays.np.dtype(value).name
        except (TypeError, ValueError):
            pass
    if name not in allowed:
        raise ValueError(f"{what} must be one of {allowed} (a string, torch or numpy dtype), "
                         f"not {value!r}")
    return name


def _field_names(fields):
    """Loader's fields= -> a tuple of extensions ("txt", "json"). One string is one extension;
    the library checks the names themselves (RF_EINVAL naming the entry)."""
    if fields is None:
        return ()
    if isinstance(fields, str):
        fields = (fields,)
    names = tuple(fields)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"fields: each entry is an extension string like 'txt', not "
                            f"{name!r}")
        if "," in name or not name.isascii():
            raise ValueError(f"fields: {name!r} is not one ASCII extension (no commas)")
    return names


def _label_fields(label):
    """Loader's label= -> rf_config's label_source and label_json_path. None must be said, not
    defaulted to: a dataset whose .cls members are missing by mistake then fails instead of
    training on -1. "json:PATH" is checked by the library at create (its words name what is
    wrong with the path)."""
    if label is None:
        return {"label_source": C.RF_LABEL_NONE}
    if isinstance(label, str) and label == "cls":
        return {"label_source": C.RF_LABEL_CLS}
    if isinstance(label, str) and label.startswith("json:"):
        return {"label_source": C.RF_LABEL_JSON,
                "label_json_path": label[5:].encode("utf-8", "surrogateescape")}
    raise ValueError(f"label must be 'cls' (each sample's KEY.cls member, an integer "
                     f"0..2147483647), 'json:PATH' (the integer field PATH, e.g. "
                     f"'annotations.class_id', of each sample's KEY.json member) or None "
                     f"(unlabelled data: every label is -1), not {label!r}")


def _source_kind(source, shards, label, per_source=None):
    """Loader's source= and shards -> rf_config.source. "auto": one path that is a directory
    is an image folder, anything else tar shards; "folder": the one path is an image folder
    or a `path label` list file (as ringfeed-bench --folder); "tar": shard patterns. With
    several sources (weights), the same of each source: every one a folder, or shards."""
    kind = _choice("source", source, _SOURCES)
    one = isinstance(shards, (str, bytes, os.PathLike))
    if per_source is not None:
        one = all(n == 1 for n in per_source)
        dirs = one and all(os.path.isdir(p) for p in shards)
    else:
        dirs = one and os.path.isdir(shards)
    if kind == "auto":
        kind = "folder" if dirs else "tar"
    if kind != "folder":
        return C.RF_SOURCE_TAR
    if not one:
        raise ValueError(f"a folder source is one path (a class-folder tree or a `path label` "
                         f"list file), not {shards!r}")
    if label != "cls":
        raise ValueError(f"label={label!r} applies to tar shards: a folder source takes its "
                         f"labels from its class folders (sorted, by index) or its list file")
    return C.RF_SOURCE_FOLDER


def _image_exts(image):
    """Loader's image= -> rf_config.image_exts ("jpg,jpeg,png,webp"), checked here so that the
    error names the argument; the C library checks the same rules again."""
    exts = (image,) if isinstance(image, str) else tuple(image)
    if not 1 <= len(exts) <= 8 or not all(
            isinstance(e, str) and e.isascii() and e.isalnum() and len(e) <= 15 for e in exts):
        raise ValueError(f"image must be 1..8 extensions of 1..15 ASCII letters or digits, "
                         f"most preferred first (e.g. ('jpg', 'png')), not {image!r}")
    return ",".join(exts).encode()


def _common_fields(seed, rank, world_size, io_threads, prefetch_depth, drop_last, on_error,
                   io_engine, timeout, decode_threads, start_epoch):
    rank = _field_int("rank", _env_int("RANK", 0) if rank is None else rank)
    timeout = float(timeout or 0)
    if not 0 <= timeout < 4294967.295:
        raise ValueError(f"timeout is in seconds, 0 (wait for ever) up to 4294967, not {timeout}")
    world_size = _field_int("world_size", _env_int("WORLD_SIZE", 1) if world_size is None
                            else world_size, lo=1)
    if not rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank} world_size={world_size}")
    return {
        "seed": _field_int("seed", seed),
        "rank": rank,
        "world_size": world_size,
        "io_threads": _field_int("io_threads", io_threads or 0),
        "prefetch_depth": _field_int("prefetch_depth", prefetch_depth or 0),
        "decode_threads": _field_int("decode_threads", decode_threads or 0) or
        _default_decode_threads(),
        "start_epoch": _field_int("start_epoch", start_epoch),
        "drop_last": 1 if drop_last else 0,
        "io_engine": _choice("io_engine", io_engine, _IO_ENGINES),
        # "fail": the first bad sample raises, naming shard, member and offset; "skip": bad
        # samples are left out and counted in stats()["skipped"] / ["skipped_by_reason"].
        "on_error": _choice("on_error", on_error, _ON_ERROR),
        # The DataLoader's `timeout`: at most this long per batch, then ringfeed.LoaderTimeout
        # saying where the pipeline stands (not sticky: the next call waits again).
        "next_timeout_ms": math.ceil(timeout * 1000),
    }


def _remote_fields(retries, timeout):
    """rf_config.remote_retries and remote_timeout_ms within their ranges; None leaves the
    library's default (0 asks for it there, so 0 retries cannot be asked for: at least 1)."""
    f = {}
    if retries is not None:
        f["remote_retries"] = _field_int("remote_retries", retries, strict=True)
    if timeout is not None:
        timeout = float(timeout)
        most = C.SETTINGS["remote_timeout_ms"].max // 1000
        if not 0 < timeout <= most:
            raise ValueError(f"remote_timeout is in seconds, > 0 and at most {most}, not "
                             f"{timeout}")
        f["remote_timeout_ms"] = max(1, round(timeout * 1000))
    return f


def _cache_fields(cache_dir, cache_bytes):
    """rf_config.cache_dir and cache_bytes; the library judges them (an empty path, a budget of
    0 with a directory) and names the directory it cannot make."""
    if cache_dir is None:
        return {"cache_bytes": _field_int("cache_bytes", cache_bytes or 0)}
    path = os.fsencode(cache_dir)
    if b"\0" in path:
        raise ValueError(f"cache_dir holds a NUL byte: {cache_dir!r}")
    return {"cache_dir": path, "cache_bytes": _field_int("cache_bytes", cache_bytes)}


def _multi_crop_text(groups):
    """multi_crop given as groups [(count, size, (scale_min, scale_max)), ...] (size an int or
    (height, width); the scale range may be left out) -> the library's text
    "COUNTxHxW:MIN-MAX,..."; a string passes as it is (the library checks both)."""
    if groups is None or isinstance(groups, str):
        return groups
    parts = []
    for g in groups:
        if not isinstance(g, (list, tuple)) or len(g) not in (2, 3):
            raise ValueError(f"multi_crop={groups!r}: each group is (count, size) or (count, "
                             f"size, (scale_min, scale_max)), not {g!r}")
        size = g[1] if isinstance(g[1], (list, tuple)) else (g[1], g[1])
        if len(size) != 2:
            raise ValueError(f"multi_crop={groups!r}: a size is an int or (height, width)")
        count, h, w = (_uint("multi_crop", v, 1, 8192) for v in (g[0], *size))
        text = f"{count}x{h}x{w}"
        if len(g) == 3:
            lo, hi = (float(x) for x in g[2])
            text += f":{lo!r}-{hi!r}"
        parts.append(text)
    return ",".join(parts)


def _size_buckets_text(buckets):
    """size_buckets given as a list of "HxW" strings or (height, width) pairs -> the library's
    text "HxW,HxW"; a string passes as it is (the library checks both, naming the entry)."""
    if buckets is None or isinstance(buckets, str):
        return buckets
    parts = []
    for b in buckets:
        if isinstance(b, str):
            parts.append(b)
            continue
        if not isinstance(b, (list, tuple)) or len(b) != 2:
            raise ValueError(f"size_buckets={buckets!r}: each bucket is \"HxW\" or (height, "
                             f"width), not {b!r}")
        h, w = (_uint("size_buckets", v, 1, 8192) for v in b)
        parts.append(f"{h}x{w}")
    return ",".join(parts)


def _find_nvjpeg():
    """Point RINGFEED_NVJPEG at the nvidia-nvjpeg wheel's library when it is installed and the
    variable is not set: the C library dlopens libnvjpeg.so.13 by name, and a wheel's lib/
    folder is not on the dynamic linker's path."""
    if os.environ.get("RINGFEED_NVJPEG"):
        return
    import importlib.util
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13/lib", "nvjpeg/lib"):
            path = os.path.join(root, sub, "libnvjpeg.so.13")
            if os.path.exists(path):
                os.environ["RINGFEED_NVJPEG"] = path
                return
