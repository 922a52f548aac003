"""_LoaderBase, what Loader and TokenLoader share: the C loader's creation and close, calls
into it, the leases of the batches handed out, and iteration (one epoch per iterator, a batch
leased, wrapped and handed out per next()), with the arrays over a batch's memory. Its epochs,
resume state and read-outs are _state.py's.
"""
import ctypes
import gc
import os
import threading
import weakref

from . import _arrays, _dataloader
from . import _capi as C
from ._args import _choice, _path_bytes
from ._batch import _Lease
from ._capi import LoaderTimeout, RingfeedError
from ._config import _ARRAY_TYPES, _env_int, _parse_device
from ._lifetime import Deferred, _Handle
from ._state import _LoaderState


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


class _LoaderBase(_LoaderState):

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
        _dataloader.register(_LoaderBase)
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
