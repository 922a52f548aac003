"""ringfeed.Loader and ringfeed.TokenLoader: the Python face of rf_loader.

Batch lifetime (the one rule to know; docs/python.md says it at length):

  A batch's `.images` (and a token batch's `.tokens`, `.x`, `.y`) are zero-copy views of the
  loader's memory: device memory from the loader's stream-ordered pool on CUDA, the pinned ring
  slot on the host. They stay valid until this loader is asked for the next batch (the next
  `next()` on any of its iterators, including the one that ends the epoch), `set_epoch()`,
  `load_state_dict()` or `close()`. At that point the batch goes back to the ring with
  rf_loader_release(..., stream=torch.cuda.current_stream()): device memory is recycled only
  after the work already queued on that stream, so the usual loop

      for images, labels in loader:
          loss = model(images).loss(labels); loss.backward(); opt.step()

  never reads a recycled buffer, without any synchronization. `.labels`, `.keys` and the other
  metadata are owned copies and stay valid forever. A later batch at the same memory gets the
  same array object back (no new tensor each step on the training loop's thread), so an array
  held past its release may show another batch.

  To hold a batch longer, call `batch.keep()`: it is then returned when you call
  `batch.release()`, or automatically once the batch and every array made from it are garbage.
  The ring is a fixed set of `prefetch_depth` slots reused in order, so a kept batch must be
  released within `prefetch_depth` batches: the loader raises RuntimeError (never deadlocks) if
  the next batch needs the slot of a batch that is still kept. To keep data indefinitely, copy
  it (`images.clone()`), or create the loader with `copy=True` (every batch then owns its
  memory, at the cost of one device/host copy per batch).

  close() (and load_state_dict(), for the C loader it replaces) stops the loader's threads
  but frees its memory only once no array or tensor over it is left: reading one after
  close() never touches freed memory, even when close() came from another thread.
"""
import ctypes
import gc
import math
import os
import threading
import weakref

from . import _arrays, _dataloader, _stats
from . import _capi as C
from . import _mix
from . import _transform
from ._args import (U32_MAX, U64_MAX, _choice, _field_int, _other_settings, _path_bytes,
                    _settings_doc, _uint)
from ._lifetime import Deferred, _Handle
from ._capi import LoaderTimeout, RingfeedError

IMAGENET_MEAN = (123.675, 116.28, 103.53)  # pixel units (0..255), RGB
IMAGENET_STD = (58.395, 57.12, 57.375)

# Enum arguments by their lower-case names (any case is accepted): the settings' own names in
# the library's table, and the binding's choices that are not one setting's.
_CROPS = C.choices("crop")
_LAYOUTS = C.choices("layout")
_IO_ENGINES = C.choices("io_engine")
_ON_ERROR = C.choices("on_error")
_ARRAY_TYPES = {"auto": "auto", "torch": "torch", "numpy": "numpy"}
_SOURCES = {"auto": "auto", "tar": "tar", "folder": "folder"}
_SCHEDULES = C.choices("decode_schedule")
# Names of rf_stats.skipped_by_reason entries (enum rf_skip_reason), read from the library.
SKIP_REASONS = _stats.SKIP_REASONS
# Names of rf_stats.recovered_by_kind entries (enum rf_recovered, rf_recovered_name): what
# libjpeg recovered from in files delivered with every pixel.
RECOVERED_KINDS = ("header_bytes", "jfif_version", "icc")
_IMAGE_DTYPES = ("uint8", "float16", "bfloat16", "float32")
_TOKEN_DTYPES = ("uint16", "int32", "int64")
STATE_VERSION = 1


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


def _copy_fields(b, n):
    """The batch's extra fields as {name: [bytes per sample]}, copied out of the slot (whose
    rows the library reuses once the batch is released)."""
    out = {}
    for f in range(int(b.nfields)):
        fld = b.fields[f]
        base = fld.data
        out[fld.name.decode("ascii")] = [
            ctypes.string_at(base + fld.offsets[i], fld.lengths[i]) if fld.lengths[i] else b""
            for i in range(n)]
    return out


def _host_meta(attr, ctype, np_dtype):
    """b.attr (n integers of ctype in the slot) -> an owned numpy array of np_dtype."""
    def make(b, n):
        ptr = getattr(b, attr)
        if not ptr:
            return _arrays.np.zeros(0, np_dtype)
        return _arrays.host_copy_int(ptr, n, ctype, "numpy", np_dtype)
    return make


def _copy_keys(b, n):
    keys = b.keys
    return [k.decode("utf-8", "surrogateescape") for k in keys[:n]] if keys else []


# How each lazily copied metadata slot of a batch is made from its rf_batch (see _BatchBase).
_META = {
    "_sample_ids": _host_meta("sample_ids", ctypes.c_uint64, "uint64"),
    "_positions": _host_meta("positions", ctypes.c_uint64, "uint64"),
    "_is_padding": _host_meta("is_padding", ctypes.c_uint8, "bool"),
    "_keys": _copy_keys,
    "_fields": _copy_fields,
}


def _meta_property(name):
    """A batch's lazily copied metadata field `name` (see _BatchBase), made by _META[name]."""
    return property(lambda self: self._lazy(name))


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


class _Lease:
    """One leased rf_batch: released exactly once, either by the loader's iterator policy,
    explicitly, or (for kept batches) when the last reference to it disappears. While it
    lives, its C loader's memory does (see _Handle)."""

    __slots__ = ("loader", "handle", "ptr", "seq", "released", "kept", "batch", "views",
                 "__weakref__")

    def __init__(self, loader, handle, ptr, seq):
        # Weak: the batch's arrays hold the lease (through their base), and the loader holds
        # those arrays (its ViewCache); a strong reference back made a cycle through arrays,
        # which the garbage collector cannot see through, so a dropped loader lived for ever.
        self.loader = weakref.ref(loader)
        self.handle = handle  # the C loader it came from (load_state_dict makes a new one)
        self.ptr = ptr  # POINTER(RfBatch)
        self.seq = seq  # delivery number on this C loader (ring slot = seq % depth)
        self.released = False
        self.kept = False
        self.batch = None  # weakref to the batch made from it, whose metadata is lazy
        self.views = []  # its arrays' keys in the loader's ViewCache
        handle.lease_made()

    @property
    def done(self):
        """Returned to the ring, or its loader closed or replaced (the destroy returns it)."""
        return self.released or self.handle.retired

    def release(self, stream=None):
        ld = self.loader()
        if not self.done and ld is not None:
            ld._release_lease(self, stream)

    def __del__(self):
        # Only kept batches get here unreleased (the iterator holds the others). This may run
        # on any thread: the release is queued and done by the consumer thread at its next call
        # into the loader (a C loader is used by one thread at a time). A loader that is gone
        # was closed, which returned every batch.
        try:
            ld = self.loader()
            if self.kept and not self.done and ld is not None:
                ld._pending.append((self.ptr, self.handle, ld._current_stream_handle()))
        except Exception:
            pass
        try:
            self.handle.lease_gone()
        except Exception:
            pass


class _BatchBase:
    """Common part of image and token batches.

    The per-sample metadata (sample_ids, positions, is_padding; keys and fields of an image
    batch) is copied out of the ring slot on first use, not when the batch is made: the
    training loop's thread pays for each batch it asks for while the GPU waits, and the usual
    `for images, labels in loader` never reads it. Whatever was not read yet is copied when the
    batch goes back to the ring (_LoaderBase._release_lease), if the batch is still referenced,
    so it stays valid forever like an eager copy; a batch nobody references costs nothing."""

    __slots__ = ("_lease", "_raw", "count", "epoch", "index", "_sample_ids", "_positions",
                 "_is_padding", "__weakref__")
    _LAZY = ("_sample_ids", "_positions", "_is_padding")

    def _lazy(self, name):
        v = getattr(self, name)
        if v is None:
            raw = self._raw
            if raw is None:  # the release copied everything (on the consumer thread) meanwhile
                return getattr(self, name)
            v = _META[name](raw, self.count)
            done = getattr(self, name)
            if done is not None:
                # Returned to the ring while we copied (a release on the consumer thread): the
                # slot may be reused already, but the release copied it first.
                return done
            setattr(self, name, v)
        return v

    def _materialize(self):
        """Copy every metadata field not read yet out of the slot (before it goes back)."""
        for name in self._LAZY:
            if getattr(self, name) is None:
                setattr(self, name, _META[name](self._raw, self.count))
        self._raw = None

    sample_ids = _meta_property("_sample_ids")
    positions = _meta_property("_positions")
    is_padding = _meta_property("_is_padding")

    def keep(self):
        """Detach this batch from the iterator's release policy (see the module docstring).
        Returns self. Release it with release(), or drop every reference to it and to the
        arrays made from it."""
        lease = self._lease
        if lease is None:  # copy=True: the batch owns its memory already
            return self
        if lease.done:
            raise RuntimeError("this batch was already returned to the loader; keep() must be "
                               "called before the next batch is requested")
        ld = lease.loader()
        if ld is not None:
            ld._keep(lease)
        return self

    def release(self, stream=None):
        """Return the batch's memory to the loader now. `stream` (a torch.cuda.Stream or a raw
        cudaStream_t handle) is where the memory was last used; default: torch's current stream
        on the loader's device. Idempotent."""
        if self._lease is not None:
            self._lease.release(stream)

    @property
    def released(self):
        return self._lease is None or self._lease.done


class Batch(_BatchBase):
    """A batch of images: `.images` (N,3,H,W) or (N,H,W,3), `.labels` int64 (N,),
    `.keys` list of str, `.fields` {name: list of N bytes} for the loader's `fields` ({} when
    none), and `.epoch`, `.index`, `.sample_ids`, `.positions`, `.is_padding`.
    Unpacks as `images, labels`."""

    __slots__ = ("images", "labels", "_keys", "_fields")
    _LAZY = _BatchBase._LAZY + ("_keys", "_fields")

    keys = _meta_property("_keys")
    fields = _meta_property("_fields")

    def __iter__(self):
        return iter((self.images, self.labels))

    def __repr__(self):
        return (f"Batch(epoch={self.epoch}, index={self.index}, count={self.count}, "
                f"images={tuple(self.images.shape)} {self.images.dtype})")


class TokenBatch(_BatchBase):
    """A batch of token windows: `.tokens` (N, L+1), `.x` = tokens[:, :-1], `.y` =
    tokens[:, 1:] (views). Unpacks as `x, y`."""

    __slots__ = ("tokens", "x", "y")

    def __iter__(self):
        return iter((self.x, self.y))

    def __repr__(self):
        return (f"TokenBatch(epoch={self.epoch}, index={self.index}, count={self.count}, "
                f"tokens={tuple(self.tokens.shape)} {self.tokens.dtype})")


class _EpochIterator:
    """Yields the rest of the loader's current epoch, then stops at RF_EPOCH_END."""

    def __init__(self, loader):
        self._loader = loader
        self._first = True
        self._done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        return self._loader._next_batch(self)

    def __len__(self):
        return len(self._loader)


class _LoaderBase:
    _source = None
    _transform = None  # Loader(transform=fn): its _transform.SampleTransform

    def __init__(self, cfg_fields, shards, device, copy, array_type, expect_dtype):
        self._h = None  # the _Handle of the C loader
        self._closed = True
        self._pending = []
        self._leases = weakref.WeakSet()  # kept leases not released yet (they die unreleased)
        self._current = None  # the iterator-managed (not kept) lease, if any
        self._views = None  # arrays over the C loader's memory, reused (_arrays.ViewCache)
        self._seq = 0
        # One consumer at a time (the C loader's rule): next() and the calls that change the
        # consumer's position are serialized, whichever threads make them. A batch that a
        # next() leased and wrapped but could not hand out (a KeyboardInterrupt came) waits in
        # _handoff for the next call, on any thread.
        self._use = threading.RLock()
        self._handoff = None

        kind, index = _parse_device(device)
        torch = _arrays.torch_module()
        _dataloader.register()
        if kind == "cuda":
            if torch is None:
                raise ImportError("device='cuda' needs torch (batches are torch CUDA tensors)")
            if index is None:
                index = (torch.cuda.current_device() if torch.cuda.is_available()
                         else _env_int("LOCAL_RANK", 0))
            self._torch_device = torch.device("cuda", index)
            self._raw_stream = _arrays.raw_stream_getter()
        else:
            self._torch_device = None
        self._device_kind, self._device_index = kind, index
        array_type = _choice("array_type", array_type, _ARRAY_TYPES)
        if kind == "cuda" and array_type == "numpy":
            raise ValueError("array_type='numpy' needs device='cpu'")
        if array_type == "auto":
            array_type = "torch" if torch is not None else "numpy"
        if array_type == "torch" and torch is None:
            raise ImportError("array_type='torch' but torch is not importable")
        if array_type == "numpy" and expect_dtype == "bfloat16":
            raise ValueError("dtype='bfloat16' on the CPU needs torch (numpy has no bfloat16)")
        if _arrays.np is None:
            raise ImportError("ringfeed needs numpy")
        self._array_type = array_type
        self._copy = bool(copy)
        self._expect_dtype = expect_dtype

        if isinstance(shards, (str, bytes, os.PathLike)):
            shards = [shards]
        self._shard_bytes = [_path_bytes(s, "shard path") for s in shards]
        if not self._shard_bytes:
            raise ValueError("no shards given")
        self._cfg_fields = dict(cfg_fields)
        self._mix_keep = self._cfg_fields.pop("_keep", None)  # arrays the config points at
        self._cfg_fields["device_kind"] = C.RF_DEVICE_CUDA if kind == "cuda" else C.RF_DEVICE_HOST
        self._cfg_fields["device_index"] = index if kind == "cuda" else 0
        self._cfg_fields["epochs"] = 0  # forever: Python iterators run one epoch each
        self._create(None)

    # ---- C loader lifetime -----------------------------------------------------------------

    def _create(self, blob):
        cfg = C.config_init()
        for k, v in self._cfg_fields.items():
            setattr(cfg, k, C.c_float3(*v) if isinstance(v, tuple) else v)
        shard_arr = (ctypes.c_char_p * len(self._shard_bytes))(*self._shard_bytes)
        cfg.shards = ctypes.cast(shard_arr, ctypes.POINTER(ctypes.c_char_p))
        cfg.shard_count = len(self._shard_bytes)
        blob_buf = None
        if blob is not None:
            blob_buf = ctypes.create_string_buffer(bytes(blob), len(blob))
            cfg.resume_state = ctypes.cast(blob_buf, ctypes.c_void_p)
            cfg.resume_state_bytes = len(blob)
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(1024)
        # shard_arr, the bytes it points to and blob_buf stay referenced until create returns
        # (the C side copies them during create). A Ctrl-C meanwhile is raised once the new
        # loader is this object's, which closes it (never a loader running with no handle).
        try:
            with Deferred():
                rc = C.lib().rf_loader_create(ctypes.byref(cfg), ctypes.byref(handle), err,
                                              len(err))
                if rc == 0:
                    self._h = _Handle(handle.value, self._transform)
                    self._closed = False
        except BaseException:
            self.close()
            raise
        del shard_arr, blob_buf
        if rc != 0:
            raise RingfeedError(rc, err.value.decode("utf-8", "replace"), "rf_loader_create")
        try:
            self._adopted(blob)
        except BaseException:
            self.close()
            raise

    def _adopted(self, blob):
        """The Python side of a C loader just created (blob: the resume state, or None)."""
        self._seq = 0
        self._depth = int(self._cfg_fields.get("prefetch_depth") or 0) or self.stats()["prefetch_depth"]
        # Two arrays a batch (images or tokens, and on CUDA the labels' view), at as many
        # addresses as the device pool cycles through: a few per ring slot.
        self._views = _arrays.ViewCache(8 * self._depth + 16)
        self._per_epoch = int(self._call(C.lib().rf_loader_batches_per_epoch))
        self._num_samples = int(self._call(C.lib().rf_loader_num_samples))
        # Epoch bookkeeping, Python side: the epoch of the batches being delivered (the C
        # loader's: start_epoch, or the epoch a resume state restored), batches delivered in
        # it, and whether this epoch started at its beginning on this C loader (else the
        # remaining count is not known).
        self._epoch = int(self.stats()["epoch"])
        self._in_epoch = 0
        self._full_epoch = blob is None

    @staticmethod
    def _error(ptr, rc, what):
        """The exception for a negative code of a call on ptr, with rf_last_error's detail
        (read while the call window keeps the loader alive)."""
        detail = C.lib().rf_last_error(ptr).decode("utf-8", "replace")
        return (LoaderTimeout if rc == C.RF_ETIMEDOUT else RingfeedError)(rc, detail, what)

    def _call(self, fn, *args):
        """fn(rf_loader*, *args) on the current C loader; a negative result raises. The call
        counts on the handle, so a close() meanwhile (from another thread) waits for it."""
        h = self._h
        if h is None:
            raise RuntimeError("the loader is closed")
        ptr = h.enter()
        try:
            rc = fn(ptr, *args)
            err = self._error(ptr, rc, fn.__name__) if rc < 0 else None
        finally:
            h.leave()
        if err is not None:
            raise err
        return rc

    def _check_open(self):
        if self._closed:
            raise RuntimeError("the loader is closed")

    def close(self):
        """Stop the loader's threads and free it. Its memory goes at once when no array made
        from its batches is left, else when the last one is garbage: arrays read after close()
        see their batch (nothing writes the ring any more), never freed memory. Safe while
        another thread iterates: a next() waiting for a batch there returns at once, raising
        RuntimeError ("closed"), and so does every later call. Idempotent."""
        with Deferred():
            self._closed = True
            h, self._h = self._h, None
            self._current = None
            self._handoff = None
            self._pending = []
            self._views = _arrays.ViewCache(0)  # a new one: another thread may be using it
            if h is not None:
                h.retire()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- streams -----------------------------------------------------------------------------

    def _current_stream_handle(self):
        if self._device_kind != "cuda":
            return None
        return self._raw_stream(self._device_index) or None

    def _stream_handle(self, stream):
        if stream is None:
            return self._current_stream_handle()
        if isinstance(stream, int):
            return stream or None
        return stream.cuda_stream or None  # torch.cuda.Stream / ExternalStream

    # ---- leases --------------------------------------------------------------------------------

    def _release_lease(self, lease, stream=None, handle=False):
        with Deferred(), self._use:
            self._release_locked(lease, stream, handle)

    def _release_locked(self, lease, stream=None, handle=False):
        if lease.done:
            return
        s = stream if handle else self._stream_handle(stream)
        batch = lease.batch() if lease.batch is not None else None
        if batch is not None:  # still referenced: copy what it has not read before the slot goes
            batch._materialize()
        lease.released = True
        if lease.kept:
            self._leases.discard(lease)
        if self._current is lease:
            self._current = None
        if lease.handle is self._h:  # else its C loader was replaced: its destroy returns it
            self._call(C.lib().rf_loader_release, lease.ptr, s)

    def _drain_pending(self):
        """Release kept batches that were garbage-collected (queued by _Lease.__del__)."""
        while self._pending:
            ptr, handle, stream = self._pending.pop(0)
            if handle is self._h:
                self._call(C.lib().rf_loader_release, ptr, stream)

    def _keep(self, lease):
        if lease is self._current:
            self._current = None
        lease.kept = True
        self._leases.add(lease)
        self._views.forget(lease)

    def _release_all(self, what):
        """Release the iterator's batch and pending kept ones; refuse while kept batches live."""
        self._drain_pending()
        if self._current is not None:
            self._release_lease(self._current)
        if len(self._leases):
            gc.collect()
            self._drain_pending()
        if len(self._leases):
            raise RuntimeError(f"{what}: {len(self._leases)} kept batch(es) still hold loader "
                               "memory; call .release() on them first")

    # ---- iteration -----------------------------------------------------------------------------

    def __iter__(self):
        """One epoch (the rest of the current one if it was interrupted): see the module doc."""
        _dataloader.check_process(self)
        self._check_open()
        return _EpochIterator(self)

    def __reduce_ex__(self, protocol):
        _dataloader.refuse_pickle(self)

    def __len__(self):
        """Batches per (full) epoch on this rank."""
        return self._per_epoch

    def _next_batch(self, it):
        """The next batch for iterator `it`, or StopIteration at its epoch's end. Serialized
        with every other consumer call (self._use), and run whole or not at all against
        Ctrl-C (Deferred): the interrupt is raised after the batch was leased, wrapped and
        stored in _handoff, where the next call (on any thread) takes it. The handoff is taken
        with one swap after the lock's release, where nothing can interrupt."""
        while True:
            with Deferred(), self._use:
                self._check_open()
                if self._handoff is None and not it._done:
                    self._advance(it)
            out, self._handoff = self._handoff, None
            if out is not None:
                return out
            if it._done:
                raise StopIteration
            # another thread took the batch this call made: make the next one

    def _advance(self, it):
        """Release the batch handed out last and lease the next one into _handoff, or mark
        `it` done at its epoch's end (under _use, SIGINT held back)."""
        # The training loop's own thread runs this once per step, competing for the CPU with
        # the decode threads: each lookup here is paid on every step (the consumer's stream is
        # looked up once, not once for the release and once for the wait).
        self._drain_pending()
        stream = self._current_stream_handle()
        if self._current is not None:
            self._release_locked(self._current, stream, handle=True)
        out = ctypes.POINTER(C.RfBatch)()
        while True:
            self._check_ring()
            rc, lease = self._lease_next(out)
            if rc == C.RF_EPOCH_END:
                # A new iterator that meets the end before any batch: the previous iterator
                # stopped right after its epoch's last batch; that end is its, not ours.
                swallow = it._first and self._in_epoch > 0
                self._epoch += 1
                self._in_epoch = 0
                self._full_epoch = True
                if swallow:
                    it._first = False
                    continue
                it._done = True
                return
            if rc == C.RF_DONE:  # not configured (epochs = 0); kept for safety
                it._done = True
                return
            break
        b = out.contents
        self._seq += 1
        self._epoch = int(b.epoch)
        self._in_epoch += 1
        it._first = False
        try:
            batch = self._wrap(b, lease, stream)
        except BaseException:
            self._release_locked(lease)
            raise
        if self._copy:
            self._release_locked(lease)
            batch._lease = None
        elif not lease.done:  # (a close() from another thread drops the loader's hold)
            self._current = lease
        self._handoff = batch

    def _lease_next(self, out):
        """rf_loader_next into out -> (rc, the batch's lease when rc is 0). The lease is made
        inside the call window, so the batch's memory outlives a close() that came meanwhile
        for as long as anything views it; a batch that arrives after the close is dropped."""
        h = self._h
        if h is None:
            raise RuntimeError("the loader is closed")
        ptr = h.enter()
        lease = err = None
        try:
            rc = C.lib().rf_loader_next(ptr, ctypes.byref(out))
            if rc < 0:
                err = self._error(ptr, rc, "rf_loader_next")
            elif rc == 0 and not h.retired:
                lease = _Lease(self, h, out, self._seq)
        finally:
            h.leave()
        if h.retired and (lease is None or rc == C.RF_ECLOSED):
            raise RuntimeError("the loader was closed (close(), maybe from another thread) "
                               "while next() waited for a batch")
        if err is not None:
            raise err if self._transform is None else self._transform.explain(err)
        return rc, lease

    def _check_ring(self):
        """Raise instead of deadlocking when the next batch needs a slot a kept batch holds.

        The ring hands out slots strictly in order (slot = delivery number % depth), so the
        batch delivered `depth` deliveries before the next one must have been released."""
        if not self._leases:
            return  # nothing kept: the iterator's own batch was released already
        if self._full_epoch and self._in_epoch >= self._per_epoch:
            return  # the next call returns RF_EPOCH_END without touching the ring
        def blocker():
            for lease in list(self._leases):
                if not lease.done and lease.seq <= self._seq - self._depth:
                    return lease
            return None
        if blocker() is None:
            return
        gc.collect()
        self._drain_pending()
        held = blocker()
        if held is not None:
            raise RuntimeError(
                f"the next batch needs the ring slot still held by a kept batch (delivered "
                f"{self._seq - held.seq} batches ago, prefetch_depth={self._depth}): release "
                "kept batches within prefetch_depth batches, copy them (.clone()), or raise "
                "prefetch_depth")

    def _fill_meta(self, batch, b, lease):
        """The batch's scalars; its per-sample metadata is read from b on first use (see
        _BatchBase), so the lease learns which batch to complete before it is released."""
        n = b.count  # (ctypes gives its integer fields as int)
        batch._lease = lease
        batch._raw = b
        batch.count = n
        batch.epoch = b.epoch
        batch.index = b.index
        batch._sample_ids = batch._positions = batch._is_padding = None
        lease.batch = weakref.ref(batch)
        return n

    def _data_array(self, b, lease, shape, dtype, stream):
        """Zero-copy view of b.data (CUDA: ordered after the copy on `stream`, the handle of
        torch's current stream)."""
        if b.device_kind == C.RF_DEVICE_CUDA:
            if self._device_kind != "cuda":
                raise RuntimeError("libringfeed returned a CUDA batch for a CPU loader")
            rc = C.lib().rf_batch_wait(lease.ptr, stream)  # the lease keeps the event alive
            if rc:
                raise RingfeedError(rc, "", "rf_batch_wait")
            t = self._views.get(lease, b.data, shape, dtype, self._cuda_view)
            return t.clone() if self._copy else t
        a = self._views.get(lease, b.data, shape, dtype, self._host_view)
        if self._copy:
            a = a.clone() if self._array_type == "torch" else a.copy()
        return a

    def _cuda_view(self, owner, ptr, shape, dtype):
        return _arrays.cuda_tensor(owner, ptr, shape, dtype, self._torch_device)

    def _host_view(self, owner, ptr, shape, dtype):
        return _arrays.host_array(owner, ptr, shape, dtype, self._array_type)

    def _check_dtype(self, b):
        got = C.DTYPE_NAMES.get(b.dtype)
        if got is not None and got == self._expect_dtype:
            return got
        got = got or f"<{b.dtype}>"
        want = self._expect_dtype
        if want is not None and got != want:
            raise RuntimeError(
                f"libringfeed ({C.library_path()}) returned {got} batches for dtype={want!r}: "
                "this build of the library does not support that output type yet")
        return got

    # ---- epochs, resume, stats ---------------------------------------------------------------

    def set_epoch(self, epoch):
        """Go to `epoch`, like DistributedSampler.set_epoch. A no-op when the loader stands in
        that epoch and has handed out none of its batches yet: at its start (after a full pass
        over the previous one, or when created with start_epoch) or at the position a resume
        restored (load_state_dict), so calling it before every epoch costs nothing and a
        resumed run continues where it was saved. Otherwise it restarts at the beginning of
        `epoch`, discarding prefetched work. Batches handed out earlier are released (kept
        ones must have been released: RuntimeError otherwise)."""
        self._check_open()
        epoch = _uint("epoch", epoch, 0, U64_MAX)
        with Deferred(), self._use:
            self._set_epoch(epoch)

    def _set_epoch(self, epoch):
        self._handoff = None  # a batch an interrupted next() left: set_epoch moves on
        self._release_all("set_epoch")
        if self._epoch == epoch and self._in_epoch == 0:
            return
        self._call(C.lib().rf_loader_set_epoch, epoch)
        self._epoch = epoch
        self._in_epoch = 0
        self._full_epoch = True

    def state_dict(self):
        """The consumer's position: every batch handed out so far counts as consumed (save it
        after the training step of the current batch). `blob` is rf_loader_state()'s resume
        blob; the other fields are informational: "epoch" is the epoch the blob resumes in
        (the next one once every batch of the current epoch was handed out), which a loader
        given the state reports as `loader.epoch`; "batches_in_epoch" the batches of that
        epoch handed out since this loader started it (or was restored into it)."""
        self._check_open()
        with Deferred(), self._use:
            return self._state_dict()

    def _state_dict(self):
        n = ctypes.c_uint64()
        self._call(C.lib().rf_loader_state, None, 0, ctypes.byref(n))
        buf = ctypes.create_string_buffer(int(n.value))
        self._call(C.lib().rf_loader_state, buf, n.value, ctypes.byref(n))
        f = self._cfg_fields
        resume_epoch = self.stats()["resume_epoch"]
        return {
            "version": STATE_VERSION,
            "blob": buf.raw[:n.value],
            "epoch": resume_epoch,
            "batches_in_epoch": self._in_epoch if resume_epoch == self._epoch else 0,
            "rank": f.get("rank", 0),
            "world_size": f.get("world_size", 1),
            "seed": f.get("seed", 0),
            "batch_size": f.get("batch_size"),
            "num_samples": self._num_samples,
        }

    def load_state_dict(self, state):
        """Continue exactly where the saved loader's consumer stood (the world size may differ:
        the C side re-partitions the rest of the epoch). Recreates the C loader."""
        self._check_open()
        if not isinstance(state, dict) or "blob" not in state:
            raise ValueError("not a ringfeed state_dict (no 'blob')")
        if state.get("version", STATE_VERSION) != STATE_VERSION:
            raise ValueError(f"unsupported ringfeed state_dict version {state.get('version')}")
        with Deferred(), self._use:
            self._load_state(state)

    def _load_state(self, state):
        self._handoff = None
        self._release_all("load_state_dict")
        h, self._h = self._h, None
        self._closed = True
        h.retire()  # destroyed now, or when the last array over its memory is garbage
        self._create(bytes(state["blob"]))

    def stats(self):
        """rf_loader_stats() as a dict (strings decoded; "skipped_by_reason" and
        "epoch_skipped_by_reason" as {reason name: count}, see SkipCounts)."""
        self._check_open()
        st = C.stats_init()
        self._call(C.lib().rf_loader_stats, ctypes.byref(st))
        return _stats.stats_dict(st)

    @property
    def config(self):
        """The configuration the C loader runs with (rf_loader_config) as a dict of
        rf_config's fields: every automatic value resolved to what the loader uses
        (decode_threads, io_threads, io_engine, prefetch_depth, device_kind, staging_bytes,
        ...; enums as their numbers, as in ringfeed.h), `shards` the list of patterns,
        `label_json_path` and `cache_dir` a str (or None), `resume_state` None (the blob is read at create
        and not kept)."""
        self._check_open()
        cfg = C.config_init()
        shards, fields, json_path, cache_dir, arrays = [], [], [], [], []

        def rf_loader_config(ptr):
            # The patterns are the loader's strings: copied out inside the call window, which
            # keeps the loader alive against a close() from another thread.
            rc = C.lib().rf_loader_config(ptr, ctypes.byref(cfg))
            shards.extend(os.fsdecode(cfg.shards[i]) for i in range(cfg.shard_count if rc == 0
                                                                     else 0))
            fields.append(cfg.fields.decode() if rc == 0 and cfg.fields else None)
            json_path.append(cfg.label_json_path if rc == 0 else None)
            cache_dir.append(cfg.cache_dir if rc == 0 else None)
            arrays.append(_mix.config_arrays(cfg) if rc == 0 else {})
            return rc

        self._call(rf_loader_config)
        out = {}
        for name, _ in C.RfConfig._fields_:
            v = getattr(cfg, name)
            if name in ("struct_size", "version"):
                continue
            if name == "shards":
                v = shards
            elif name == "fields":  # the loader's string, read inside the call window
                v = fields[0]
            elif name == "label_json_path":  # the loader's copy, read in the call window
                v = json_path[0].decode("utf-8", "surrogateescape") if json_path[0] else None
            elif name == "cache_dir":  # the loader's copy, read in the call window
                v = os.fsdecode(cache_dir[0]) if cache_dir[0] else None
            elif isinstance(v, ctypes.Array):
                v = [float(x) for x in v]
            out[name] = v
        out.update(arrays[0])
        return out

    @property
    def transform_errors(self):
        """The latest messages of transform failures (each naming the sample's key and the
        exception), oldest first, at most 100: what on_error="skip" left out. [] without a
        transform."""
        return list(self._transform.errors) if self._transform is not None else []

    def epoch_stats(self):
        """This rank's counts of one epoch: the epoch of the last batch handed out (rf_stats'
        counted_epoch and epoch_* fields) as {"epoch", "delivered" (real samples, padding not
        counted), "skipped", "skipped_by_reason" ({reason name: count}), "total",
        "final"}. Only that epoch's batches count, with the skips of their own positions:
        unlike stats()["skipped"], never the skips of batches prefetched past them. "final"
        once the epoch's iteration ended (RF_EPOCH_END); then delivered + skipped == total.
        After a resume they cover the rest of the epoch."""
        return _stats.epoch_stats(self.stats())

    @property
    def num_samples(self):
        return self._num_samples

    @property
    def device(self):
        return "cpu" if self._device_kind == "cpu" else f"cuda:{self._device_index}"

    @property
    def prefetch_depth(self):
        return self._depth

    @property
    def epoch(self):
        """The epoch the loader stands in: of the batches being delivered, the next one once
        an epoch's iteration ended; right after load_state_dict, the epoch the state restored
        (where a resumed training loop starts: `for epoch in range(loader.epoch, epochs)`)."""
        return self._epoch


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


class Loader(_LoaderBase):
    """Images and labels from WebDataset tar shards.

    Loader(shards, batch_size, *, size=224, crop="random", layout="NCHW", dtype="uint8",
           mean=None, std=None, device=None, shuffle=True, seed=0, rank=None, world_size=None,
           decode_threads=0, io_threads=0, prefetch_depth=0, drop_last=False, on_error="fail",
           copy=False, array_type="auto", io_engine="auto", flip_prob=None, scale=None,
           ratio=None, start_epoch=0, decode_nice=None, gpu_decode=False, gpu_decode_percent=100,
           hw_decode_percent=0, timeout=0, dct_scaling=True, label="cls", fields=(),
           max_field_bytes=None, source="auto", image=("jpg", "jpeg", "png", "webp"),
           schedule="auto", cache_dir=None, cache_bytes=0, remote_retries=None,
           remote_timeout=None, weights=None, class_weights=None, sample_weights=None,
           transform=None, transform_threads=0, **settings)

    shards: a path, glob or brace range (`train-{000000..000099}.tar`), or a list of them;
      tar shards may be http://, https:// or s3:// URLs instead (all or none; docs/remote.md);
      str, bytes or os.PathLike, passed to the library as os.fsencode() bytes (a NUL in one
      is a ValueError). With a folder source, one path: an image folder or list file.
      With weights, a list of sources, each one of these or {"shards": ..., "label": ...}
      with a label rule of its own (docs/python.md, "Mixing sources").
    weights: one number >= 0 per source: each source's share of an epoch's positions, exact
      per epoch and interleaved by the seed. epoch_size=N sets the positions per epoch
      (default: the dataset's samples); a source asked for more than it holds starts a new
      permutation of itself, or with replacement="on" every draw is independent.
    class_weights: a weight per class id (a sequence, or {class id: weight}), for sources
      whose labels are known at create (a folder); sample_weights: one per sample in the
      dataset's order. Both draw within a source in proportion, with replacement.
    source: "auto" (default): one path that is a directory is an image folder, anything else
      tar shards; "folder": the one path is an ImageFolder tree (one subfolder per class,
      labels by sorted subfolder index; `loader.classes` names them) or a text file of `path
      label` lines (as ringfeed-bench --folder); "tar": shard patterns, even a directory's
      name. Every other option applies to folders as to shards.
    label: "cls" (default): each sample's label is its KEY.cls member, a decimal integer
      0..2147483647 ("5" or "5\\n"); a sample whose label member is missing, empty, negative
      or not such a number is bad input, as a corrupt JPEG is (on_error="fail" raises naming
      the shard, member and offset; "skip" counts it under stats()["skipped_by_reason"]
      ["label"]). "json:PATH": the integer field PATH (keys joined by dots,
      "annotations.class_id") of each sample's KEY.json member, judged the same way (bad
      JSON, the field missing, a float, a negative number or a string is a `label` error
      naming the member, its offset and what is wrong; a key twice on the path is one too).
      None: unlabelled data, every label is -1 and no label member is read. A folder source
      takes its labels from its folders or list: only the default is accepted with it.
    fields: member extensions whose bytes each batch delivers, e.g. ("txt", "json"):
      batch.fields["txt"] is a list of `bytes`, one per sample in batch order (b"" for
      padding samples), copied out of the library's buffers when the batch is made, so they
      stay valid after release. A sample without one of the members is bad input
      (on_error="fail" raises naming the shard, sample, offset and extension; "skip" counts it
      under "field"). Extensions match exactly, case-sensitive, as in WebDataset. Tar shards
      only (a folder source has no members). A field may name the label member too
      (fields=("json",) with label="json:PATH" gets each KEY.json's bytes).
    transform: a Python callable over each decoded image, fn(img) -> array, or fn(img, key=,
      fields=, seed=) with those it declares: img is the sample's HWC uint8 array (size x
      size x 3, cropped, resized and flipped, before the dtype conversion), key its key (str),
      fields {extension: bytes} of the loader's fields, seed a per-sample int for its random
      draws (from seed, epoch and sample only); it returns a uint8 array of the same shape,
      which replaces the pixels. It runs on the decode threads before the batch is handed
      out: order, exactly-once, state_dict() and the skip counts are as without it. An
      exception (or another shape or dtype) is bad input: on_error="fail" raises
      ringfeed.TransformError naming the key and the exception; "skip" replaces the sample,
      counts it under "hook", logs it (logger "ringfeed") and keeps the message in
      transform_errors. Not with gpu_decode or hw_decode_percent (the library refuses).
      docs/python.md, "Per-sample transforms in Python".
    transform_threads: at most this many transform calls at once (default: one per decode
      thread); with decode_threads left at 0 the loader starts this many decode threads, or
      its default number when that is more.
    max_field_bytes: the largest member a field takes (default 16 KiB, at most 64 MiB); a
      larger one is bad input ("too_large"). Each ring slot holds batch_size x len(fields) x
      max_field_bytes bytes for them.
    image: the image members' extensions, most preferred first (a tuple of str, or one str
      like "png"), compared without regard to case: each sample's image is its member whose
      extension comes earliest (WebDataset's "jpg;png"); a sample with none fails the loader's
      creation. 1..8 extensions of 1..15 letters or digits (ValueError otherwise). The image is
      decoded as what its bytes are: JPEG, PNG (8/16-bit, palette, gray, interlaced) or WebP,
      to RGB with alpha dropped, through the same crop, resize, flip and conversion; JPEG is
      the fast path and the only one gpu_decode and hw_decode_percent take (the others are
      decoded by the CPU into the same batch). Bytes of none of these formats are bad input
      counted under "not_jpeg".
    dtype: "uint8" (pixels as decoded), or "float16"/"bfloat16"/"float32" holding
      (pixel - mean[c]) / std[c] with mean/std in pixel units (0..255), e.g. ringfeed.IMAGENET_MEAN
      and ringfeed.IMAGENET_STD; the conversion runs on the GPU for CUDA loaders. A torch
      dtype (torch.bfloat16) or numpy dtype (np.float32) names the same types.
    size: the output's side (224: square), or (height, width) for H x W images, which
      crop="random" (torchvision's RandomResizedCrop((h, w)): the box is drawn on the source
      with scale and ratio, then resized to h x w) and crop="center" (Resize(shorter side ->
      round(max(h, w) * 256 / 224)) then CenterCrop((h, w))) both honour; batch.images is then
      (N, 3, h, w) for NCHW and (N, h, w, 3) for NHWC.
    crop, layout, io_engine, on_error, array_type, device: strings in any case ("nhwc").
    Integer arguments must be integers within their rf_config field (uint32, or uint64 for
      seed and start_epoch; batch_size and world_size >= 1): anything else is a TypeError or
      a ValueError naming the argument, never a silently wrapped value.
    device: "cuda" (torch's current device), "cuda:N", "cpu", or None (CUDA if usable).
    decode_threads: 0 for ringfeed.default_decode_threads(): the CPUs this process may use
      (affinity mask, cgroup quota) divided by LOCAL_WORLD_SIZE when torchrun sets it.
    decode_nice: niceness the decode threads add to their own (0..19; None: 10, the library's
      default; 0: none), so that the training loop's threads run first when decoding keeps
      every CPU busy (docs/tuning.md).
    gpu_decode: decode baseline JPEGs on the GPU: for restart-marked files (ringfeed-pack
      --restart, ringfeed.add_restarts) the decode threads only cut out the restart intervals a
      crop needs; for plain files they walk the Huffman codes up to the crop's last row (about
      half a CPU decode) and copy the crop's rows; kernels do the rest. Other images
      (progressive, CMYK, PNG, ...) decode on the CPU in the same batches, and every image of
      the run at full scale (no DCT scaling), so each has exactly the pixels the CPU path gives
      with dct_scaling=False whichever engine took it; stats()["gpu_decoded"] counts the
      delivered GPU ones, stats()["gpu_plain_decoded"] the plain files among them. With
      on_error="skip" a sample the kernels find bad is replaced before its batch is handed out
      (docs/reliability.md).
    gpu_decode_percent: with gpu_decode, the share (1..100) of eligible images sent to the GPU;
      the seed decides which, the rest decode on the CPU. For training a model that keeps the
      GPU busy, ~25 keeps both the CPUs and the GPU below saturation (docs/gpu-decode.md).
    hw_decode_percent: the share (0..100) of images decoded by the GPU's hardware JPEG
      decoders (A100, A30, H100, H200), which use neither the CPUs nor the SMs; any baseline
      JPEG, restart markers or not. Needs libnvjpeg (the nvidia-nvjpeg wheel is found
      automatically); stats()["hw_decoded"] counts them. They open beside the first batches
      (about 1 s on an H200), whose share of them the GPU kernels (with gpu_decode) or the
      CPU decode meanwhile; a GPU without them leaves that share there, stats()["hw_engines"]
      0 and stats()["hw_engines_why"] the open's error. on_error="skip" works, but a file the engines decode without an error (damaged
      entropy data) is never skipped.
    dct_scaling: True (default): a CPU-only loader decodes images whose crop is at least twice
      the output size at 1/2..1/8 scale (faster; pixels differ from a full-scale decode, by up to
      tens of levels at edges). False: always full scale, the pixels a GPU-decode loader gives.
      gpu_decode, hw_decode_percent and schedule="balance" (a CUDA device's "auto") turn it
      off for their whole run.
      "always": on with every schedule, the GPU paths leaving those crops to the CPU, so the
      pixels are a CPU-only loader's whichever path took each (docs/gpu-decode.md).
    schedule: where JPEGs are decoded (rf_config.decode_schedule, docs/gpu-decode.md).
      "auto" (default): "manual" when gpu_decode or hw_decode_percent is given, otherwise
      "balance" on a CUDA device and "cpu" elsewhere (and for batches of more than 65,535
      samples, which the GPU paths refuse). "balance" (CUDA only): a
      scheduler spreads JPEGs over the hardware decoders (when present; opened only once its
      GPU share first reaches half the images), the GPU kernels and
      the CPU in shares moved by hill-climbing on the training loop's measured rate
      (from the CPU only once the first batch is out, and only while the loader is the
      bound), no percentage to
      tune; every image is decoded at full scale (dct_scaling="always": the crops the CPU
      DCT-scales stay on it), so the pixels do not depend on which path took each;
      stats()["sched_gpu_permille"] and ["sched_hw_permille"] show its shares. "cpu": the CPU
      only. "manual": gpu_decode, gpu_decode_percent and hw_decode_percent as given.
    prefetch_depth: batch slots in the ring; 0 is the library's default (4, 8 with
      gpu_decode, hw_decode_percent or schedule="balance", which a CUDA device's "auto" is).
    rank, world_size: default from the RANK and WORLD_SIZE environment variables (torchrun).
      Every rank gets the same number of batches; the last ones are padded with repeated
      samples (batch.is_padding) unless drop_last.
    timeout: seconds to wait for a batch (0: for ever), as the DataLoader's. On expiry
      ringfeed.LoaderTimeout (a RingfeedError and a TimeoutError) says where the pipeline
      stands, down to the oldest unfinished sample's shard, member and offset; nothing is
      lost, and iterating again waits again.
    cache_dir, cache_bytes: for URL shards, a local directory (str, bytes or os.PathLike; made
      when missing) keeping whole shards under a budget of cache_bytes bytes (required with
      cache_dir), least recently used out first: a shard found there is read from local disk
      for the whole run, a missing one is fetched whole in the background (one extra GET per
      shard) once the loader reads it and read from disk afterwards. Several ranks may share
      the directory. stats()["shard_cache_hits"], ["shard_cache_misses"], ... and
      ["shard_cache_why"] say what it did (docs/remote.md). None (default): no cache; ignored
      for local shards.
    remote_retries: for URL shards, how often one request is retried (timeouts, 5xx, 429/503,
      resets, short bodies) before it is an I/O error naming the URL and byte range: 1..100,
      None (default) the library's 5 (rf_config.remote_retries).
    remote_timeout: for URL shards, seconds to connect, and how long a transfer may stall
      (counted in whole seconds, at least 1) before it is retried: > 0 and at most 3600, None
      (default) the library's 30 (rf_config.remote_timeout_ms).
    Iterating yields one epoch of Batch objects; see the module docstring for how long a
    batch's memory stays valid, and `copy=True` to make every batch own its memory. Where
    torch is installed a Loader is a torch IterableDataset: DataLoader(loader,
    batch_size=None) yields the same batches (num_workers=0: ringfeed has threads of its own).
    """

    def __init__(self, shards, batch_size, *, size=224, crop="random", layout="NCHW",
                 dtype="uint8", mean=None, std=None, device=None, shuffle=True, seed=0,
                 rank=None, world_size=None, decode_threads=0, io_threads=0, prefetch_depth=0,
                 drop_last=False, on_error="fail", copy=False, array_type="auto",
                 io_engine="auto", flip_prob=None, scale=None, ratio=None, start_epoch=0,
                 decode_nice=None, gpu_decode=False, gpu_decode_percent=100,
                 hw_decode_percent=0, timeout=0, dct_scaling=True, label="cls", fields=(),
                 max_field_bytes=None, source="auto",
                 image=("jpg", "jpeg", "png", "webp"), schedule="auto", cache_dir=None,
                 cache_bytes=0, remote_retries=None, remote_timeout=None, weights=None,
                 class_weights=None, sample_weights=None, transform=None, transform_threads=0,
                 **settings):
        dtype = _dtype_name(dtype, _IMAGE_DTYPES)
        shards, per_source, source_labels = _mix.split_sources(shards, weights)
        batch_size = _field_int("batch_size", batch_size, lo=1)
        f = _common_fields(seed, rank, world_size, io_threads, prefetch_depth, drop_last,
                           on_error, io_engine, timeout, decode_threads, start_epoch)
        f.update({
            "batch_size": batch_size,
            "crop": _choice("crop", crop, _CROPS),
            "layout": _choice("layout", layout, _LAYOUTS),
            "order": C.RF_ORDER_GLOBAL if shuffle else C.RF_ORDER_NONE,
            "gpu_decode": 1 if gpu_decode else 0,
            "gpu_decode_percent": _field_int("gpu_decode_percent", gpu_decode_percent),
            "hw_decode_percent": _field_int("hw_decode_percent", hw_decode_percent),
            "dct_scaling": _dct_scaling(dct_scaling),
            "dtype": C.DTYPES[dtype][0],
            "source": _source_kind(source, shards, label, per_source),
            "image_exts": _image_exts(image),
            "decode_schedule": _choice("schedule", schedule, _SCHEDULES),
        })
        f.update(_size_fields(size))
        f.update(_label_fields(label))
        f.update(_cache_fields(cache_dir, cache_bytes))
        f.update(_remote_fields(remote_retries, remote_timeout))
        f.update(_other_settings("Loader", settings))
        f.update(_mix.mix_fields(per_source, weights, class_weights, sample_weights,
                                 source_labels))
        self.fields = _field_names(fields)
        if self.fields:
            f["fields"] = ",".join(self.fields).encode("ascii")
        if max_field_bytes is not None:
            f["max_field_bytes"] = _field_int("max_field_bytes", max_field_bytes, lo=1)
        if transform is not None:
            self._transform = _transform.SampleTransform(
                transform, transform_threads, decode_threads, _default_decode_threads(),
                self.fields, f["on_error"] == _ON_ERROR["skip"])
            f.update(self._transform.config_fields())
        elif transform_threads:
            raise ValueError("transform_threads needs a transform")
        if mean is not None or std is not None:
            if dtype == "uint8":
                raise ValueError("mean/std apply to float outputs: pass dtype='float32', "
                                 "'float16' or 'bfloat16'")
            mean = (0.0, 0.0, 0.0) if mean is None else tuple(float(m) for m in mean)
            std = (1.0, 1.0, 1.0) if std is None else tuple(float(s) for s in std)
            if len(mean) != 3 or len(std) != 3 or min(std) <= 0:
                raise ValueError("mean and std need 3 values each, std > 0")
            if max(std) < 1.0:
                raise ValueError(
                    f"std={std} looks like 0..1 units; ringfeed normalizes pixels in 0..255 units "
                    "(use ringfeed.IMAGENET_MEAN / IMAGENET_STD, or multiply by 255)")
            f["mean"], f["std"] = mean, std
        if decode_nice is not None:  # None: the library's default (10)
            f["decode_nice"] = _field_int("decode_nice", decode_nice)
        if flip_prob is not None:
            f["flip_prob"] = float(flip_prob)
        if scale is not None:
            f["scale_min"], f["scale_max"] = (float(x) for x in scale)
        if ratio is not None:
            f["ratio_min"], f["ratio_max"] = (float(x) for x in ratio)
        if hw_decode_percent:
            _find_nvjpeg()
        self.batch_size = batch_size
        self.layout = "NHWC" if f["layout"] == C.RF_LAYOUT_NHWC else "NCHW"
        self.dtype = dtype
        self._classes = None
        super().__init__(f, shards, device, copy, array_type, dtype)

    @property
    def classes(self):
        """The class names of a folder source, in label order (classes[label] is the name of
        the sorted subfolder that label stands for), read with the walker the loader uses;
        [] for a `path label` list file, None for tar shards; with several folder sources
        (weights=), one such list per source, whose labels are its own. Read on first use: a
        tree changed after the loader was created gives the names as they are then."""
        if self._cfg_fields["source"] != C.RF_SOURCE_FOLDER:
            return None
        if self._classes is None:
            self._classes = [C.image_list_classes(p) for p in self._shard_bytes]
        if len(self._classes) > 1:  # mixed folders: each source's labels are its own
            return [list(c) for c in self._classes]
        return list(self._classes[0])

    def _wrap(self, b, lease, stream):
        batch = Batch.__new__(Batch)
        n = self._fill_meta(batch, b, lease)
        batch._keys = batch._fields = None
        dtype = self._check_dtype(b)
        batch.images = self._data_array(b, lease, tuple(b.shape), dtype, stream)
        if b.device_kind == C.RF_DEVICE_CUDA and b.labels_device:
            lab = self._views.get(lease, b.labels_device, (n,), "int32", self._cuda_view)
            batch.labels = lab.long()  # a new tensor, ordered on the current stream
        else:
            batch.labels = _arrays.host_copy_int(b.labels, n, ctypes.c_int32, self._array_type)
        return batch


class TokenLoader(_LoaderBase):
    """Fixed-length token windows from flat binary token files (nanoGPT/Megatron .bin).

    TokenLoader(path, token_bytes, seq_len, batch_size, *, dtype="int64", device=None,
                shuffle=True, seed=0, rank=None, world_size=None, io_threads=0,
                prefetch_depth=4, drop_last=False, on_error="fail", copy=False,
                array_type="auto", io_engine="auto", start_epoch=0, timeout=0,
                cache_dir=None, cache_bytes=0, remote_retries=None, remote_timeout=None,
                weights=None, sample_weights=None, **settings)

    path: a token file's path, glob or brace range, or a list of them; the files may be
      http://, https:// or s3:// URLs instead (all or none; docs/remote.md): each window is
      then one ranged GET, and cache_dir, cache_bytes, remote_retries and remote_timeout
      mean what they mean for Loader's URL shards (the cache keeps whole token files).
    Every sample is a window of seq_len + 1 tokens; iterating yields TokenBatch objects that
    unpack as (x, y) with x = window[:, :-1] and y = window[:, 1:] (views of one buffer).
    shuffle=True draws window starts at random each epoch (seeded) in a global permutation;
    shuffle=False walks non-overlapping windows in file order. dtype: "int64" (default, what
    nn.Embedding and cross_entropy want), "int32", "uint16", or None (as stored on disk); torch
    and numpy dtypes name them too. Same argument checks, lifetime rules and `timeout` as
    Loader. weights=, epoch_size=, replacement= and sample_weights= (one per window) mix
    sources of token files as Loader's mix sources of shards (path then a list of sources).
    """

    def __init__(self, path, token_bytes, seq_len, batch_size, *, dtype="int64", device=None,
                 shuffle=True, seed=0, rank=None, world_size=None, io_threads=0,
                 prefetch_depth=4, drop_last=False, on_error="fail", copy=False,
                 array_type="auto", io_engine="auto", start_epoch=0, decode_threads=0,
                 timeout=0, cache_dir=None, cache_bytes=0, remote_retries=None,
                 remote_timeout=None, weights=None, sample_weights=None, **settings):
        path, per_source, _ = _mix.split_sources(path, weights)
        token_bytes = _field_int("token_bytes", token_bytes)
        if token_bytes not in (2, 4):
            raise ValueError(f"token_bytes must be 2 (uint16) or 4 (uint32), not {token_bytes}")
        seq_len = _field_int("seq_len", seq_len, lo=1, hi=U32_MAX - 1)  # windows: seq_len + 1
        batch_size = _field_int("batch_size", batch_size, lo=1)
        if dtype is not None:
            dtype = _dtype_name(dtype, _TOKEN_DTYPES)
        f = _common_fields(seed, rank, world_size, io_threads, prefetch_depth, drop_last,
                           on_error, io_engine, timeout, decode_threads, start_epoch)
        f.update({
            "batch_size": batch_size,
            "source": C.RF_SOURCE_TOKENS,
            "token_bytes": token_bytes,
            "seq_len": seq_len,
            "token_windows": C.RF_WINDOWS_RANDOM if shuffle else C.RF_WINDOWS_SEQUENTIAL,
            "token_dtype": C.DTYPES[dtype][0] if dtype else 0,
            "order": C.RF_ORDER_GLOBAL if shuffle else C.RF_ORDER_NONE,
        })
        f.update(_cache_fields(cache_dir, cache_bytes))
        f.update(_remote_fields(remote_retries, remote_timeout))
        f.update(_other_settings("TokenLoader", settings))
        f.update(_mix.mix_fields(per_source, weights, None, sample_weights))
        self.batch_size = batch_size
        self.seq_len = seq_len
        # As stored on disk: uint16 for 2-byte tokens; 4-byte tokens are uint32, delivered as
        # int32 (token ids stay far below 2**31).
        expect = dtype if dtype else ("uint16" if token_bytes == 2 else "int32")
        self.dtype = expect
        super().__init__(f, path, device, copy, array_type, None if dtype is None else dtype)

    def _wrap(self, b, lease, stream):
        batch = TokenBatch.__new__(TokenBatch)
        self._fill_meta(batch, b, lease)
        dtype = self._check_dtype(b)
        if dtype not in _TOKEN_DTYPES:
            raise RuntimeError(f"libringfeed returned {dtype} token batches")
        shape = (int(b.shape[0]), int(b.shape[1]))
        t = self._data_array(b, lease, shape, dtype, stream)
        batch.tokens = t
        batch.x = t[:, :-1]
        batch.y = t[:, 1:]
        return batch


Loader.__doc__ += _settings_doc()
TokenLoader.__doc__ += _settings_doc()
