"""Zero-copy array views over loader memory, for numpy and torch.

A view object exposes one region of a leased batch through __array_interface__ (host memory)
or __cuda_array_interface__ (device memory) and holds a reference to the lease it belongs to:
numpy arrays and torch tensors made from it keep the view alive (numpy through .base, torch
through the deleter of its from_blob storage), so the lease lives as long as any array over its
memory does. Whether the memory is still *valid* is the lease's business (see loader.py).
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


def current_stream(device_index):
    """The raw cudaStream_t (an int) of torch's current stream on that device. torch's own
    lookup without building a torch.cuda.Stream object (which costs ten times as much on the
    training loop's thread every step), falling back to the public API."""
    torch = torch_module()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


def cuda_tensor(owner, ptr, shape, dtype, device):
    """A zero-copy torch tensor over device memory."""
    torch = torch_module()
    t = torch.as_tensor(CudaView(owner, ptr, shape, dtype), device=device)
    if dtype == "bfloat16":
        t = t.view(torch.bfloat16)
    return t


_CTYPE_DTYPES = {ctypes.c_int32: "<i4", ctypes.c_uint64: "<u8", ctypes.c_uint8: "u1"}


def host_copy_int(ptr, count, ctype, kind, np_dtype="int64"):
    """Copy `count` integers of `ctype` at host `ptr` into an owned int64 array/tensor."""
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
