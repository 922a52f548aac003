"""The checks of Loader's and TokenLoader's keyword arguments, from the library's settings table
(rf_config_settings, _capi.SETTINGS): integers within their rf_config field, enum names, paths,
and every setting without an argument of its own taken as a keyword argument of its name.
"""
import operator
import os
import textwrap

from . import _capi as C
from . import _mix

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1


def _choice(name, value, table):
    """The table entry of an enum argument, named in any case ("nhwc" is "NHWC")."""
    key = value.lower() if isinstance(value, str) else None
    if key not in table:
        raise ValueError(f"{name} must be one of {sorted(table)} (any case), not {value!r}")
    return table[key]


def _uint(name, value, lo=0, hi=U32_MAX):
    """An integer argument checked against the rf_config field it fills (lo..hi): ctypes would
    keep only the low bits of a larger value (2**32 + 4 would become 4) and int() would
    truncate a float, so both are refused, naming the argument."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    v = operator.index(value)
    if not lo <= v <= hi:
        raise ValueError(f"{name}={v} is out of range {lo}..{hi}")
    return v


def _field_int(name, value, field=None, lo=None, hi=None, strict=False):
    """An integer argument for the rf_config field `field` (default: the argument's name),
    checked as _uint does against the values of the field's C type in the library's table, or
    (strict) against the field's own range, for arguments whose 0 would silently ask for the
    default there; lo and hi narrow it further."""
    s = C.SETTINGS[field or name]
    tlo, thi = (s.min, s.max) if strict else C.TYPE_RANGES[s.type]
    return _uint(name, value, max(tlo, 0) if lo is None else lo, thi if hi is None else hi)


def _path_bytes(path, what):
    """A path argument (str, bytes or os.PathLike) as the bytes the C library opens: any name
    the file system holds, UTF-8 or not (os.fsencode), and never one cut short at a NUL."""
    try:
        b = os.fsencode(path)
    except TypeError:
        raise TypeError(f"{what} must be a str, bytes or os.PathLike path, not {path!r}") \
            from None
    if b"\0" in b:
        raise ValueError(f"{what} {path!r} contains a NUL byte")
    return b


# The rf_config settings that Loader and TokenLoader set through an argument of their own (or
# a method) with its own form, by that argument's name. Every other setting is a keyword
# argument of its own name, checked against its row (_other_settings), so that a setting the
# library's table gains is a keyword here without a line of this file.
_FACES = {
    "shards": "shards", "shard_count": "shards", "batch_size": "batch_size",
    "image_size": "size", "image_height": "size", "image_width": "size", "crop": "crop",
    "layout": "layout", "scale_min": "scale", "scale_max": "scale", "ratio_min": "ratio",
    "ratio_max": "ratio", "flip_prob": "flip_prob", "seed": "seed", "order": "shuffle",
    "drop_last": "drop_last", "rank": "rank", "world_size": "world_size",
    "epochs": "__iter__",  # one epoch per iteration, for as many as the loop asks
    "start_epoch": "start_epoch", "decode_threads": "decode_threads",
    "io_threads": "io_threads", "io_engine": "io_engine", "prefetch_depth": "prefetch_depth",
    "device_kind": "device", "device_index": "device", "resume_state": "load_state_dict",
    "resume_state_bytes": "load_state_dict", "dtype": "dtype", "mean": "mean", "std": "std",
    "source": "source", "token_bytes": "token_bytes", "seq_len": "seq_len",
    "token_windows": "shuffle", "token_dtype": "dtype", "on_error": "on_error",
    "decode_nice": "decode_nice", "gpu_decode": "gpu_decode",
    "gpu_decode_percent": "gpu_decode_percent", "hw_decode_percent": "hw_decode_percent",
    "next_timeout_ms": "timeout", "dct_scaling": "dct_scaling", "label_source": "label",
    "label_json_path": "label", "fields": "fields", "max_field_bytes": "max_field_bytes",
    "image_exts": "image", "decode_schedule": "schedule", "remote_retries": "remote_retries",
    "remote_timeout_ms": "remote_timeout", "cache_dir": "cache_dir",
    "cache_bytes": "cache_bytes", **_mix.FACES,
}


_NO_KEYWORD = C.RF_SETTING_HEADER | C.RF_SETTING_C_ONLY


def keyword_settings():
    """The settings that are keyword arguments of their own name (see _FACES), in the table's
    order."""
    return [s for s in C.SETTINGS.values() if s.name not in _FACES and not s.flags & _NO_KEYWORD]


def _other_settings(owner, kwargs):
    """The rf_config fields of Loader's and TokenLoader's keyword arguments named as settings:
    each checked against its row of the library's table (a value in its range, an enum's name,
    a flag's truth); None leaves the library's default. A name that is no such setting is the
    TypeError Python raises for an unknown keyword."""
    mine = {s.name: s for s in keyword_settings()}
    f = {}
    for name, value in kwargs.items():
        if name not in mine:
            raise TypeError(f"{owner}() got an unexpected keyword argument '{name}'")
        if value is not None:
            f[name] = _setting_value(mine[name], value)
    return f


def _setting_value(s, value):
    """value as the rf_config field of setting s, or a TypeError / ValueError naming it."""
    if s.type == "bool":
        return 1 if value else 0
    if s.type == "enum":
        if isinstance(value, bool) and {"on", "off"} <= set(s.values):
            value = "on" if value else "off"  # replacement=True reads as Python's
        return _choice(s.name, value, C.choices(s.name))
    if s.type in ("u32", "i32", "u64"):
        return _uint(s.name, value, s.min, s.max)
    if s.type in ("f32", "f32x3"):
        many = s.type == "f32x3"
        if many and isinstance(value, (int, float)):  # one number for all three channels
            value = (value,) * 3
        values = tuple(float(v) for v in value) if many else (float(value),)
        if len(values) != (3 if many else 1) or not all(s.min <= v <= s.max for v in values):
            raise ValueError(f"{s.name}={value!r} is out of range {s.min:g}..{s.max:g}"
                             f"{' (3 values)' if many else ''}")
        return values if many else values[0]
    if s.type == "str":
        return _path_bytes(value, s.name)
    raise TypeError(f"{s.name}: a setting of type {s.type} has no Python form")


def _describe_setting(s):
    """One entry of the docstrings' list of keyword settings: what, the values, the default."""
    if s.type == "bool":
        form = "True or False"
    elif s.type == "enum":
        form = " or ".join(repr(v) for v in s.values)
    else:
        unit = f" {s.unit}" if s.unit else ""
        top = C.TYPE_RANGES.get(s.type, (0, None))[1]
        form = (f"{s.min:g}..{s.max:g}{unit}" if s.type.startswith("f") else
                f"at least {s.min}{unit}" if s.max == top else f"{s.min}..{s.max}{unit}")
    if s.rule is not None:
        default = s.rule
    elif s.type in ("u32", "i32", "u64") and not s.min <= s.default <= s.max:
        default = "none"  # unset: 0, outside the range
    elif s.type == "enum":
        default = repr(s.values[s.default])
    elif s.type == "bool":
        default = str(bool(s.default))
    else:
        default = f"{s.default:g}" if isinstance(s.default, float) else repr(s.default)
    return f"{s.name}: {s.doc}; {form}, default {default}."


def _settings_doc():
    """The docstrings' list of the settings that are keyword arguments of their own name."""
    head = ("Every other setting of rf_config is a keyword argument of its own name, checked "
            "against the library's table (ringfeed.settings()); None, the default, leaves the "
            "library's:")
    lines = textwrap.wrap(head, 92, initial_indent="    ", subsequent_indent="    ")
    for s in keyword_settings():
        lines += textwrap.wrap(_describe_setting(s), 92, initial_indent="    ",
                               subsequent_indent="      ")
    return "\n" + "\n".join(lines) + "\n    "
