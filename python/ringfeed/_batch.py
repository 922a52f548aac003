"""What a batch is made of under Batch and TokenBatch (loader.py): _Lease, one leased rf_batch
and its release, and _BatchBase, the batch's scalars and its per-sample metadata copied out
of the ring slot on first use (_META says how each field is copied).
"""
import ctypes
import weakref

from . import _arrays
from ._capi import RF_LAYOUT_NHWC


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


def copy_boxes(b, n, kind):
    """b.crop_boxes and b.flips -> (an owned (n, 4) int32 array of x, y, w, h in the source
    image's pixels, an owned (n,) bool array), numpy or torch (CPU) as kind; (None, None)
    where the library gives none (token batches)."""
    if not b.crop_boxes or not b.flips:
        return None, None
    boxes = _arrays.host_copy_int(b.crop_boxes, 4 * n, ctypes.c_int32, "numpy", "int32")
    flips = _arrays.host_copy_int(b.flips, n, ctypes.c_uint8, "numpy", "bool")
    boxes = boxes.reshape(n, 4)
    if kind == "numpy":
        return boxes, flips
    torch = _arrays.torch_module()
    return torch.from_numpy(boxes), torch.from_numpy(flips)


def copy_letterbox(b, n, kind):
    """b.letterbox -> an owned (n, 4) float32 array of scale_x, scale_y, pad_x, pad_y (a source
    point x lands at x * scale_x + pad_x of the output before the flip), numpy or torch (CPU)
    as kind; None where the library gives none (token batches)."""
    if not b.letterbox:
        return None
    rows = _arrays.host_copy_int(b.letterbox, 4 * n, ctypes.c_float, "numpy", "float32")
    rows = rows.reshape(n, 4)
    return rows if kind == "numpy" else _arrays.torch_module().from_numpy(rows)


def copy_sizes(b, n, kind):
    """b.sizes -> an owned (n, 2) int32 array of each image's height, width (crop="native"),
    numpy or torch (CPU) as kind; None for the other crops."""
    if not b.sizes:
        return None
    rows = _arrays.host_copy_int(b.sizes, 2 * n, ctypes.c_uint32, "numpy", "int32")
    rows = rows.reshape(n, 2)
    return rows if kind == "numpy" else _arrays.torch_module().from_numpy(rows)


def native_views(images, sizes, nchw):
    """crop="native": each sample's image as a view of images (N x slot, numpy or torch, any
    device), its own height x width, packed from its slot's start; blanks (0 x 0) empty."""
    n = len(sizes)
    flat = images.reshape(n, -1)
    out = []
    for i in range(n):
        h, w = int(sizes[i][0]), int(sizes[i][1])
        shape = (3, h, w) if nchw else (h, w, 3)
        out.append(flat[i, :h * w * 3].reshape(shape))
    return out


def bucket_of(b):
    """size_buckets: the batch's (bucket index, height, width); None when off."""
    if not b.bucket_height:
        return None
    return int(b.bucket), int(b.bucket_height), int(b.bucket_width)


def bucket_array(a, n, shape):
    """size_buckets: the first prod(shape) elements of each sample's row of `a` (n rows: its
    slot, image_height x image_width large), where the bucket's image or mask is packed, as an
    (n,) + shape view (numpy or torch, any device; strided: the rows stay slot-sized apart)."""
    size = 1
    for d in shape:
        size *= d
    part = a.reshape(n, -1)[:, :size]
    # splitting the row's contiguous stretch: a view in numpy and torch alike
    return (part.reshape((n,) + shape) if isinstance(part, _arrays.np.ndarray)
            else part.view((n,) + shape))


def view_arrays(images, b, n):
    """multi_crop: each view of the batch as an array over `images` (the batch's (n, row)
    array: every sample's views one after another), shaped (n, H, W, 3) or (n, 3, H, W); the
    same memory, so numpy or torch, host or device, zero-copy or copied as images is. [] when
    multi_crop is off."""
    out, start = [], 0
    for k in range(int(b.nviews)):
        shape = tuple(int(s) for s in b.views[k].shape[1:])
        size = shape[0] * shape[1] * shape[2]
        part = images[:, start:start + size]
        # splitting the row's contiguous stretch: a view in numpy and torch alike
        out.append(part.reshape((n,) + shape) if isinstance(part, _arrays.np.ndarray)
                   else part.view((n,) + shape))
        start += size
    return out


def copy_view_boxes(b, n, kind):
    """multi_crop: per view, copy_boxes' (boxes, flips) and copy_letterbox's rows of that view,
    as three lists."""
    boxes, flips, places = [], [], []
    for k in range(int(b.nviews)):
        bx, fl = copy_boxes(b.views[k], n, kind)
        boxes.append(bx)
        flips.append(fl)
        places.append(copy_letterbox(b.views[k], n, kind))
    return boxes, flips, places


def copy_view_targets(b, n, max_boxes, max_points, kind):
    """multi_crop: per view, (its masks as copy_masks gives them, its copy_annotations
    tuple), as two lists; the masks' [] without masks, both [] when multi_crop is off."""
    masks, annots = [], []
    for k in range(int(b.nviews)):
        v = b.views[k]
        if v.masks:
            h, w = _view_hw(v, b.layout == RF_LAYOUT_NHWC)
            masks.append(copy_masks(b, n, h, w, kind, v.masks))
        annots.append(copy_annotations(v, n, max_boxes, max_points, kind))
    return masks, annots


def _view_hw(v, nhwc):
    """A view's height and width from its shape."""
    return (int(v.shape[1]), int(v.shape[2])) if nhwc else (int(v.shape[2]), int(v.shape[3]))


def targets_of(boxes, classes, counts, points, point_counts, n):
    """Batch.targets()' list of n dicts from one crop's (or one view's) annotation arrays."""
    out = []
    for i in range(n):
        t = {}
        if boxes is not None:
            k = int(counts[i])
            t["boxes"] = boxes[i, :k]
            cls = classes[i, :k]
            t["labels"] = cls.astype("int64") if hasattr(cls, "astype") else cls.long()
        if points is not None:
            t["keypoints"] = points[i, :int(point_counts[i])]
        out.append(t)
    return out


def copy_multi_labels(b, n, width, kind):
    """b.label_multihot or b.label_list and b.label_counts -> (an owned (n, width) uint8
    multi-hot or int32 -1-padded list, an owned (n,) int32 array of counts), numpy or torch
    (CPU) as kind; (None, None) when multi_label is off."""
    if not b.label_counts or not (b.label_multihot or b.label_list):
        return None, None
    if b.label_multihot:
        rows = _arrays.host_copy_int(b.label_multihot, n * width, ctypes.c_uint8, "numpy",
                                     "uint8")
    else:
        rows = _arrays.host_copy_int(b.label_list, n * width, ctypes.c_int32, "numpy", "int32")
    counts = _arrays.host_copy_int(b.label_counts, n, ctypes.c_uint32, "numpy", "int32")
    rows = rows.reshape(n, width)
    if kind == "numpy":
        return rows, counts
    torch = _arrays.torch_module()
    return torch.from_numpy(rows), torch.from_numpy(counts)


def _host_floats(ptr, count, shape):
    """`count` float32 at host ptr -> an owned numpy array of `shape`."""
    if count == 0:
        return _arrays.np.zeros(shape, "float32")
    raw = ctypes.string_at(ptr, count * 4)
    return _arrays.np.frombuffer(raw, dtype="float32").copy().reshape(shape)


def copy_annotations(b, n, max_boxes, max_points, kind):
    """b.boxes, box_classes, box_counts, points and point_counts -> owned arrays, numpy or
    torch (CPU) as kind: boxes float32 (n, max_boxes, 4) xyxy in output pixels, box_classes
    int32 (n, max_boxes) (-1 padded), box_counts int32 (n,), points float32 (n, max_points,
    3) x, y, v, point_counts int32 (n,); None for each the loader does not deliver."""
    out = [None] * 5
    if b.box_counts:
        out[0] = _host_floats(b.boxes, n * max_boxes * 4, (n, max_boxes, 4))
        out[1] = _arrays.host_copy_int(b.box_classes, n * max_boxes, ctypes.c_int32, "numpy",
                                       "int32").reshape(n, max_boxes)
        out[2] = _arrays.host_copy_int(b.box_counts, n, ctypes.c_uint32, "numpy", "int32")
    if b.point_counts:
        out[3] = _host_floats(b.points, n * max_points * 3, (n, max_points, 3))
        out[4] = _arrays.host_copy_int(b.point_counts, n, ctypes.c_uint32, "numpy", "int32")
    if kind != "numpy":
        torch = _arrays.torch_module()
        out = [None if a is None else torch.from_numpy(a) for a in out]
    return tuple(out)


def copy_masks(b, n, height, width, kind, masks=None):
    """b.masks (or `masks`, a view's, of the batch b) -> an owned (n, height, width) uint8 or
    int32 array (b.mask_dtype: 0 uint8, 1 int32), numpy or torch (CPU) as kind, copied with
    one memmove (a batch of masks is as large as its images); None when the loader has no
    masks."""
    src = b.masks if masks is None else masks
    if not src:
        return None
    a = _arrays.np.empty((n, height, width), "int32" if b.mask_dtype == 1 else "uint8")
    if a.nbytes:
        ctypes.memmove(a.ctypes.data, src, a.nbytes)
    if kind == "numpy":
        return a
    return _arrays.torch_module().from_numpy(a)


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
