"""Loader(transform=fn, transform_threads=N): a Python callable over each decoded image, run by
the C library's per-sample hook (rf_config.sample_hook, include/ringfeed.h) on the decode
threads, after the decode and before the conversion and the copy (docs/python.md, "Per-sample
transforms in Python").

Why the hook and not a pool over the batches next() returns: a sample the hook refuses is the
library's bad input like a corrupt JPEG, so on_error="skip" replaces it from the rank's share
before its batch is handed out (batches stay full, every sample is delivered once or counted
as skipped under "hook"), the batch order stays the plan's, a resume state needs nothing more,
and fn sees uint8 pixels even when the loader delivers float or CUDA tensors. The decode
threads are the pool: each calls fn for the sample it decoded, holding the GIL only inside
the call (ctypes takes it for the callback).
"""
import collections
import ctypes
import inspect
import logging
import re
import threading

from . import _arrays
from . import _capi as C
from ._args import _uint
from ._lifetime import HOOK_THREAD

log = logging.getLogger("ringfeed")

ERRORS_KEPT = 100  # messages transform_errors keeps (skip mode), newest last
_TOKENS_KEPT = 256  # failures remembered for the error next() raises (fail mode)
_RETURNED = re.compile(r"sample_hook returned (\d+)")


class TransformError(C.RingfeedError):
    """The loader's transform raised (or returned a wrong array) on a sample, with
    on_error="fail": names the sample's key and the exception, which is its __cause__;
    `detail` is the library's text (shard, member, byte offset, sample id, epoch)."""


KEYWORDS = ("key", "fields", "seed")


def _keywords(fn):
    """The KEYWORDS fn declares, read from its signature once (a **kwargs takes them all). A
    callable whose signature cannot be read (some builtins) gets none."""
    if not callable(fn):
        raise TypeError(f"transform must be callable, not {type(fn).__name__}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return frozenset()
    params = sig.parameters.values()
    if any(p.kind == p.VAR_KEYWORD for p in params):
        wanted = frozenset(KEYWORDS)
    else:
        wanted = frozenset(p.name for p in params if p.name in KEYWORDS and
                           p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    try:
        sig.bind(None, **{k: None for k in wanted})
    except TypeError as e:
        raise TypeError(f"transform {fn!r} must take the image as its one positional argument "
                        f"(and key=, fields=, seed= if it declares them): {e}") from None
    return wanted


def _describe(e):
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


class SampleTransform:
    """fn as an rf_sample_hook. Built once per Loader; `hook` (the ctypes callback) must stay
    referenced while a C loader may call it, which the loader's _Handle sees to."""

    def __init__(self, fn, threads, decode_threads, default_threads, field_names, skip):
        self.fn = fn
        wanted = _keywords(fn)
        self._key, self._fields, self._seed = (k in wanted for k in KEYWORDS)
        self.field_names = tuple(field_names)
        self.skip = skip
        given = decode_threads or 0
        self.threads = _uint("transform_threads", threads or given or 0,
                             hi=C.SETTINGS["decode_threads"].max)
        if self.threads and given and given < self.threads:
            raise ValueError(f"transform_threads={self.threads} needs decode_threads >= "
                             f"{self.threads} (fn runs on the decode threads), not {given}")
        # decode_threads left to the default: at least one decode thread per transform thread
        self.decode_threads = given or max(self.threads, default_threads)
        # Fewer transform threads than decode threads: a gate, made before the decode threads
        # that pass it start.
        self._gate = (threading.BoundedSemaphore(self.threads)
                      if self.threads and self.threads < self.decode_threads else None)
        self._mu = threading.Lock()
        self._token = 0
        self._failures = collections.OrderedDict()  # token -> (key, exception)
        self.errors = collections.deque(maxlen=ERRORS_KEPT)
        self.hook = C.SAMPLE_HOOK(self._call)

    def _call(self, vp, _ctx):
        """The hook: 0 keeps the sample; a failure returns a token (1..2**31-1) the library
        puts in its message, through which next()'s error finds the exception."""
        v = vp.contents
        key = v.key.decode("utf-8", "surrogateescape") if v.key else ""
        HOOK_THREAD.active = True
        try:
            self._run(v, key)
            return 0
        except BaseException as e:  # anything escaping a ctypes callback would keep the sample
            return self._failed(key, e)
        finally:
            HOOK_THREAD.active = False

    def _run(self, v, key):
        np = _arrays.np
        h, w = v.height, v.width
        buf = (ctypes.c_uint8 * (h * w * 3)).from_address(v.pixels)
        row = np.ndarray((h, w, 3), np.uint8, buffer=buf,
                         strides=(v.row_stride, v.pixel_stride, v.channel_stride))
        # fn gets an array of its own: the slot's memory is reused once the batch is out, so a
        # reference fn keeps must not see other pixels (or freed memory after close()).
        img = row.copy()
        kw = {}
        if self._key:
            kw["key"] = key
        if self._fields:
            kw["fields"] = {self.field_names[f]: ctypes.string_at(v.field_data[f],
                                                                   v.field_lengths[f])
                            for f in range(v.nfields)}
        if self._seed:
            kw["seed"] = v.seed
        if self._gate is not None:
            with self._gate:
                out = self.fn(img, **kw)
        else:
            out = self.fn(img, **kw)
        out = np.asarray(out)
        if out.shape != (h, w, 3) or out.dtype != np.uint8:
            raise ValueError(f"transform returned {out.dtype} {tuple(out.shape)}; it must "
                             f"return uint8 {(h, w, 3)} (HWC), as it was given")
        row[...] = out

    def _failed(self, key, e):
        msg = f"transform raised on sample {key}: {_describe(e)}"
        with self._mu:
            self._token = self._token % (2**31 - 1) + 1
            token = self._token
            if not self.skip:  # (skip mode raises none of them: no traceback kept alive)
                self._failures[token] = (key, e)
                while len(self._failures) > _TOKENS_KEPT:
                    self._failures.popitem(last=False)
            self.errors.append(msg)
        if self.skip:
            log.warning("ringfeed: %s (skipped, counted under \"hook\")", msg)
        return token

    def explain(self, err):
        """next()'s RingfeedError as a TransformError naming the key and the exception when the
        hook refused the sample for a failure of fn; err itself otherwise."""
        m = _RETURNED.search(err.detail) if err.code == C.RF_EHOOK else None
        with self._mu:
            rec = self._failures.get(int(m.group(1))) if m else None
        if rec is None:
            return err
        key, exc = rec
        out = TransformError(err.code, f"transform raised on sample {key}: {_describe(exc)} "
                             f"({err.detail})", "rf_loader_next")
        out.key = key
        out.__cause__ = exc
        return out

    def config_fields(self):
        f = {"sample_hook": ctypes.cast(self.hook, ctypes.c_void_p).value}
        if self.decode_threads:
            f["decode_threads"] = self.decode_threads
        return f
