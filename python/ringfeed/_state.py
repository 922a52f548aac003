"""The loader's epochs, resume state and read-outs: set_epoch, state_dict and load_state_dict
(the checkpoint protocol over rf_loader_state and a resume blob), stats, config, epoch_stats
and the loader's properties. _LoaderBase (_base.py) has them from _LoaderState.
"""
import ctypes
import os

from . import _capi as C
from . import _mix, _stats
from ._args import U64_MAX, _uint
from ._lifetime import Deferred

STATE_VERSION = 1


class _LoaderState:
    """The part of _LoaderBase that moves the consumer between epochs and saved positions, and
    reports what the loader is and has done."""

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
        `label_json_path`, `cache_dir` and `mask` a str (or None), `resume_state` None (the blob is read at create
        and not kept)."""
        self._check_open()
        cfg = C.config_init()
        shards, fields, json_path, cache_dir, mask, arrays = [], [], [], [], [], []

        def rf_loader_config(ptr):
            # The patterns are the loader's strings: copied out inside the call window, which
            # keeps the loader alive against a close() from another thread.
            rc = C.lib().rf_loader_config(ptr, ctypes.byref(cfg))
            shards.extend(os.fsdecode(cfg.shards[i]) for i in range(cfg.shard_count if rc == 0
                                                                     else 0))
            fields.append(cfg.fields.decode() if rc == 0 and cfg.fields else None)
            json_path.append(cfg.label_json_path if rc == 0 else None)
            cache_dir.append(cfg.cache_dir if rc == 0 else None)
            mask.append(cfg.mask.decode() if rc == 0 and cfg.mask else None)
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
            elif name == "mask":  # the loader's copy (printable ASCII), read in the call window
                v = mask[0]
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
