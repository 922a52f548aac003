"""rf_stats as Python dicts: a loader's stats() and epoch_stats(), with the skip counts keyed by
the names the library gives its reasons (rf_skip_reason_name), so that a reason added there
needs nothing here."""
import ctypes

from . import _capi as C

# The skip reasons' names in the index order of enum rf_skip_reason: skipped_by_reason's keys.
SKIP_REASONS = C.skip_reasons()
# Entries of rf_stats' skipped_by_reason arrays (RF_SKIP_REASONS): the named reasons and room.
_SLOTS = C.RfStats.skipped_by_reason.size // ctypes.sizeof(ctypes.c_uint64)


class SkipCounts(dict):
    """Samples left out per reason: {name: count} for every reason the library names, in the
    order of enum rf_skip_reason, zeros included (docs/reliability.md says what each means).

    This was a list of RF_SKIP_REASONS integers indexed like SKIP_REASONS. A position still
    reads its reason's count (counts[SKIP_REASONS.index("corrupt")] is counts["corrupt"], and
    a position that names no reason reads 0), so code indexing the list keeps working;
    iterating gives the names, as any dict's keys do (sum(counts.values()) for the total)."""

    __slots__ = ()

    def __missing__(self, key):
        if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < _SLOTS:
            return self[SKIP_REASONS[key]] if key < len(SKIP_REASONS) else 0
        raise KeyError(key)


def skip_counts(array):
    """rf_stats' skipped_by_reason (or epoch_skipped_by_reason) array as SkipCounts."""
    return SkipCounts((name, int(array[i])) for i, name in enumerate(SKIP_REASONS))


def stats_dict(st):
    """An rf_stats struct as a dict of its fields (struct_size left out): strings decoded, the
    skip counts as SkipCounts, other arrays as lists."""
    out = {}
    for name, _ in C.RfStats._fields_:
        if name == "struct_size":
            continue
        v = getattr(st, name)
        if isinstance(v, bytes):
            out[name] = v.decode("utf-8", "replace")
        elif name in ("skipped_by_reason", "epoch_skipped_by_reason"):
            out[name] = skip_counts(v)
        elif isinstance(v, ctypes.Array):
            out[name] = [int(x) for x in v]
        else:
            out[name] = int(v)
    return out


def epoch_stats(st):
    """The counts of one epoch out of stats_dict()'s result (see Loader.epoch_stats)."""
    return {
        "epoch": st["counted_epoch"],
        "delivered": st["epoch_delivered"],
        "skipped": st["epoch_skipped"],
        "skipped_by_reason": st["epoch_skipped_by_reason"],
        "total": st["epoch_total"],
        "final": bool(st["epoch_final"]),
    }
