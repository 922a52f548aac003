"""Weighted mixing's Python face: Loader's sources, weights=, class_weights= and
sample_weights= as rf_config's arrays (source_shards, weights, class_weights, sample_weights
and their counts; docs/python.md, "Mixing sources"). The values are checked by the library,
whose errors name the setting; here only their Python form is."""

import ctypes
import os

from . import _capi as C

# The rf_config fields this module sets, for _args._FACES: each is set through one argument.
FACES = {
    "source_shards": "shards", "source_count": "shards", "source_labels": "shards",
    "weights": "weights",
    "weight_count": "weights", "class_weights": "class_weights",
    "class_weight_count": "class_weights", "sample_weights": "sample_weights",
    "sample_weight_count": "sample_weights",
}


def _is_path(x):
    return isinstance(x, (str, bytes, os.PathLike))


_NO_LABEL = object()


def _label_rule(i, label):
    """A source's label= (as Loader's: "cls", "json:PATH", None) -> its source_labels entry."""
    if label is None:
        return b"none"
    if isinstance(label, str) and (label == "cls" or label.startswith("json:")):
        return label.encode("utf-8", "surrogateescape")
    raise ValueError(f"shards[{i}]['label'] must be 'cls', 'json:PATH' or None, not {label!r}")


def split_sources(shards, weights):
    """shards -> (flat pattern list, patterns per source or None, label rule per source or
    None). With weights, shards is a list of sources, each a pattern, a list of patterns, or
    {"shards": either, "label": its own label rule}; without, a list of patterns is one
    source, as before weights existed."""
    if weights is None or _is_path(shards):
        return shards, None, None
    flat, per, labels = [], [], []
    for i, src in enumerate(shards):
        label = _NO_LABEL
        if isinstance(src, dict):
            unknown = set(src) - {"shards", "label"}
            if unknown or "shards" not in src:
                raise ValueError(f"shards[{i}]: a source dict has 'shards' and maybe 'label', "
                                 f"not {sorted(src)}")
            label, src = src.get("label", _NO_LABEL), src["shards"]
        pats = [src] if _is_path(src) else list(src) if isinstance(src, (list, tuple)) else None
        if pats is None:
            raise TypeError(f"shards[{i}]: a source is a path, pattern or URL, a list of them, "
                            f"or a dict, not {type(src).__name__}")
        if not pats:
            raise ValueError(f"shards[{i}]: a source needs at least one pattern")
        flat += pats
        per.append(len(pats))
        labels.append(None if label is _NO_LABEL else _label_rule(i, label))
    return flat, per, labels if any(v is not None for v in labels) else None


def _floats(name, values):
    """A sequence of numbers (or a numpy array) as a float32 buffer the library reads."""
    np = _np()
    try:
        arr = np.ascontiguousarray(np.asarray(values, dtype=np.float64).ravel(),
                                   dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: a sequence of numbers, not {type(values).__name__}") from e
    if arr.size == 0:
        raise ValueError(f"{name} is empty: give one weight per "
                         f"{'source' if name == 'weights' else name[:-8]}")
    return arr


def _np():
    import numpy
    return numpy


def _class_list(class_weights):
    """{class id: weight} or a sequence indexed by class id -> a dense sequence (missing ids 0)."""
    if isinstance(class_weights, dict):
        if not class_weights:
            return []
        ids = [int(k) for k in class_weights]
        if min(ids) < 0:
            raise ValueError(f"class_weights: class id {min(ids)} is negative")
        dense = [0.0] * (max(ids) + 1)
        for k, v in class_weights.items():
            dense[int(k)] = v
        return dense
    return class_weights


def mix_fields(per_source, weights, class_weights, sample_weights, labels=None):
    """The rf_config fields of the mixing arguments, as {field: value}; the buffers are under
    "_keep" (the caller keeps them alive for every create)."""
    f, keep = {}, []
    if labels is not None:
        arr = (ctypes.c_char_p * len(labels))(*labels)
        keep.append(arr)
        f["source_labels"] = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))

    def put(field, count_field, arr, ctype):
        keep.append(arr)
        f[field] = arr.ctypes.data_as(ctypes.POINTER(ctype))
        f[count_field] = int(arr.size)

    if per_source is not None:
        put("source_shards", "source_count", _np().asarray(per_source, dtype=_np().uint32),
            ctypes.c_uint32)
    if weights is not None:
        put("weights", "weight_count", _floats("weights", weights), ctypes.c_float)
    if class_weights is not None:
        put("class_weights", "class_weight_count",
            _floats("class_weights", _class_list(class_weights)), ctypes.c_float)
    if sample_weights is not None:
        put("sample_weights", "sample_weight_count",
            _floats("sample_weights", sample_weights), ctypes.c_float)
    if keep:
        f["_keep"] = keep
    return f


def config_arrays(cfg):
    """The loader's copies of the arrays as lists (rf_loader_config's view), read while the
    loader is alive: {field: list or None}, the counts as they are."""
    out = {}
    for field, count in (("source_shards", "source_count"), ("weights", "weight_count"),
                         ("class_weights", "class_weight_count"),
                         ("sample_weights", "sample_weight_count")):
        ptr, n = getattr(cfg, field), getattr(cfg, count)
        out[field] = [ptr[i] for i in range(n)] if ptr and n else None
    labels = cfg.source_labels
    out["source_labels"] = ([None if labels[i] is None else labels[i].decode("utf-8",
                                                                          "surrogateescape")
                             for i in range(cfg.source_count)] if labels else None)
    return out

