"""Zero-copy array views over loader memory, for numpy and torch.

A view object exposes one region of a leased batch through __array_interface__ (host memory)
or __cuda_array_interface__ (device memory) and holds a reference to its owner, a Holder of
the lease it belongs to: numpy arrays and torch tensors made from it keep the view alive (numpy
through .base, torch through the deleter of its from_blob storage), so the lease lives as long
as any array over its memory does. Whether the memory is still *valid* is the lease's business
(see _batch.py). The loader reuses an array for a later batch at the same memory (ViewCache):
the Holder then points at that batch's lease.
"""
import ctypes

try:  # numpy is required for host batches, optional for CUDA-only use with torch
    import numpy as np
except ImportError:  # pragma: no cover - exercised only without numpy
    np = None

_torch = None
_torch_checked = False


def torch_module():
    """torch if importable, else None (imported lazily: `import ringfeed` stays light)."""
    global _torch, _torch_checked
    if not _torch_checked:
        _torch_checked = True
        try:
            import torch
            _torch = torch
        except ImportError:
            _torch = None
    return _torch


# element type name -> array-interface typestr. bfloat16 has no typestr: it travels as 16-bit
# integers and is reinterpreted by torch (a view, no copy).
TYPESTR = {
    "uint8": "|u1",
    "int32": "<i4",
    "int64": "<i8",
    "uint16": "<u2",
    "float16": "<f2",
    "bfloat16": "<i2",
    "float32": "<f4",
}


class HostView:
    """Host memory at `ptr` as an array (version 3 array interface), owned by `owner`."""

    __slots__ = ("owner", "__array_interface__")

    def __init__(self, owner, ptr, shape, dtype):
        self.owner = owner
        self.__array_interface__ = {
            "version": 3,
            "shape": tuple(int(s) for s in shape),
            "typestr": TYPESTR[dtype],
            "data": (int(ptr), False),
            "strides": None,
        }


class CudaView:
    """Device memory at `ptr` (CUDA array interface v3), owned by `owner`.

    `stream` is None on purpose: the producer (ringfeed) already made the consumer's stream
    wait for the copy with rf_batch_wait() before the view is handed out, so the consumer must
    not synchronize again."""

    __slots__ = ("owner", "__cuda_array_interface__")

    def __init__(self, owner, ptr, shape, dtype):
        self.owner = owner
        self.__cuda_array_interface__ = {
            "version": 3,
            "shape": tuple(int(s) for s in shape),
            "typestr": TYPESTR[dtype],
            "data": (int(ptr), False),
            "strides": None,
            "stream": None,
        }


def host_array(owner, ptr, shape, dtype, kind):
    """A zero-copy array over host memory: torch tensor (kind 'torch') or numpy array."""
    arr = np.asarray(HostView(owner, ptr, shape, dtype))
    if kind == "numpy":
        return arr
    torch = torch_module()
    t = torch.from_numpy(arr)
    if dtype == "bfloat16":
        t = t.view(torch.bfloat16)
    return t


def raw_stream_getter():
    """A function device_index -> the raw cudaStream_t (an int) of torch's current stream on
    that device: torch's own lookup, without building a torch.cuda.Stream object (which costs
    ten times as much on the training loop's thread every step), else the public API."""
    torch = torch_module()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device_index: torch.cuda.current_stream(device_index).cuda_stream


def cuda_tensor(owner, ptr, shape, dtype, device):
    """A zero-copy torch tensor over device memory."""
    torch = torch_module()
    t = torch.as_tensor(CudaView(owner, ptr, shape, dtype), device=device)
    if dtype == "bfloat16":
        t = t.view(torch.bfloat16)
    return t


class Holder:
    """The owner of a cached view: the lease of the batch now at its memory (see ViewCache)."""

    __slots__ = ("lease",)

    def __init__(self, lease):
        self.lease = lease


class ViewCache:
    """Arrays over loader memory, made once per (address, shape, dtype) and handed out again
    for each later batch at the same memory.

    Making a torch tensor over a device pointer (torch.as_tensor of a CUDA array interface)
    costs the training loop's thread 4 us in a tight loop but 30-80 us as the first thing after
    the step's synchronization (measured on the H200, the caches then cold), every step: time
    in which the GPU waits. The host ring's slots are at fixed addresses and the device pool
    hands the same few blocks back in turn, so nearly every batch finds its arrays here.

    An array is handed out again only while it still describes that memory (a caller may have
    changed its shape or strides in place, or made it require grad); its Holder then points at
    the new batch's lease, so the array keeps that lease, and with it the loader's memory,
    alive. forget() drops the entries of a batch that is kept, so its arrays are never handed
    out for another batch and keep their own lease for as long as they live."""

    __slots__ = ("_d", "_max")

    def __init__(self, max_entries):
        self._d = {}
        self._max = max_entries

    def get(self, lease, ptr, shape, dtype, make):
        """The array for (ptr, shape, dtype), now owned by lease; make(owner, ptr, shape,
        dtype) makes a missing one."""
        key = (ptr, shape, dtype)
        hit = self._d.get(key)
        if hit is not None:
            a, holder, strides, torch_array = hit
            if torch_array:
                intact = (a.shape == shape and a.stride() == strides and a.data_ptr() == ptr
                          and not a.requires_grad)
            else:  # numpy: an array's data pointer cannot be changed in place
                intact = a.shape == shape and a.strides == strides
            if intact:
                holder.lease = lease
                lease.views.append(key)
                return a
        holder = Holder(lease)
        a = make(holder, ptr, shape, dtype)
        torch_array = not isinstance(a, np.ndarray) if np is not None else True
        d = self._d
        d.pop(key, None)
        if d and len(d) >= self._max:  # the oldest out: an address the pool no longer uses
            del d[next(iter(d))]
        d[key] = (a, holder, a.stride() if torch_array else a.strides, torch_array)
        lease.views.append(key)
        return a

    def forget(self, lease):
        """Drop the entries a kept lease's batch was handed (see the class doc)."""
        for key in lease.views:
            hit = self._d.get(key)
            if hit is not None and hit[1].lease is lease:
                del self._d[key]


_CTYPE_DTYPES = {ctypes.c_int32: "<i4", ctypes.c_uint32: "<u4", ctypes.c_uint64: "<u8",
                 ctypes.c_uint8: "u1", ctypes.c_float: "<f4"}


def host_copy_int(ptr, count, ctype, kind, np_dtype="int64"):
    """Copy `count` numbers of `ctype` at host `ptr` (integers, or c_float with a float
    np_dtype) into an owned array/tensor of np_dtype (default int64)."""
    if count == 0:
        a = np.zeros(0, dtype=np_dtype)
    else:
        # One memcpy into bytes, then one conversion: a third of the time of
        # np.ctypeslib.as_array (which builds a ctypes array type per call).
        raw = ctypes.string_at(ptr, count * ctypes.sizeof(ctype))
        a = np.frombuffer(raw, dtype=_CTYPE_DTYPES[ctype]).astype(np_dtype)
    if kind == "numpy":
        return a
    return torch_module().from_numpy(a)
