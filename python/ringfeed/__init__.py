"""ringfeed: io_uring + thread-pool JPEG decode + pinned ring + async GPU copy, for PyTorch.

    import ringfeed
    loader = ringfeed.Loader("data/train-{000000..000099}.tar", 256, device="cuda",
                             dtype="bfloat16", mean=ringfeed.IMAGENET_MEAN,
                             std=ringfeed.IMAGENET_STD)
    # resuming: loader.load_state_dict(state) here (state from loader.state_dict())
    for epoch in range(loader.epoch, epochs):
        loader.set_epoch(epoch)  # a restored loader continues at the saved batch
        for images, labels in loader:
            ...

A batch's images are zero-copy views of loader memory, valid until the loader is asked for the
next batch (see ringfeed.loader's docstring and docs/python.md). The binding is ctypes over
libringfeed.so, found through RINGFEED_LIB, next to this package, or in <repo>/build*/, and
loaded by this import, which fails with ImportError when the library is missing or does not
match the binding (its version or a struct's layout).
"""
from . import _capi

# Loaded now, not at first use: a missing or mismatched library fails the import.
_capi.lib()

from ._capi import LoaderTimeout, RingfeedError, library_path  # noqa: E402
from .loader import (IMAGENET_MEAN, IMAGENET_STD, Batch, Loader, TokenBatch,  # noqa: E402
                     TokenLoader)
from ._stats import SKIP_REASONS  # noqa: E402
from ._transform import TransformError  # noqa: E402
from . import _base, _dataloader  # noqa: E402

# A program that imported torch first gets loaders that are IterableDatasets from the start;
# otherwise the first loader made registers them, as it imports torch where torch is installed.
_dataloader.register(_base._LoaderBase)

__all__ = ["Loader", "TokenLoader", "Batch", "TokenBatch", "RingfeedError", "LoaderTimeout",
           "TransformError",
           "IMAGENET_MEAN", "IMAGENET_STD", "version", "cuda_device_count", "cuda_status",
           "library_path", "add_restarts", "cpu_count", "default_decode_threads", "settings",
           "SKIP_REASONS"]
# include/ringfeed.h's version, which import has checked the library's rf_version() against.
__version__ = _capi.BINDING_VERSION


def add_restarts(jpeg, interval=0, optimize=True):
    """JPEG bytes rewritten losslessly (the same decoded pixels) with restart markers, what
    `ringfeed-pack --restart` does to every image: ringfeed then decodes only the part of each
    image a crop needs. For shards written from Python (e.g. webdataset's ShardWriter):
    `sample["jpg"] = ringfeed.add_restarts(jpeg_bytes)`. interval: MCUs between markers, 0 for
    ringfeed's choice; optimize: optimal Huffman tables. Raises RingfeedError (RF_EDECODE, with
    libjpeg's words) on bytes that are not a decodable JPEG."""
    from ._args import _uint
    return _capi.add_restarts(jpeg, _uint("interval", interval), optimize)


def settings():
    """rf_config's settings as the loaded library's table describes them (rf_config_settings):
    {name: ringfeed._capi.Setting} in declaration order, each with its type, default (or the
    rule that decides it), valid range, enum names, unit, the stage that reads it and a one-line
    doc. Loader and TokenLoader take each one that has no argument of its own as a keyword
    argument of its name (their docstrings list them)."""
    return dict(_capi.SETTINGS)


def version():
    """Version of the loaded libringfeed ("MAJOR.MINOR.PATCH")."""
    return _capi.version()


def cpu_count():
    """CPUs this process may use (rf_cpu_count): the CPUs of its affinity mask (taskset,
    numactl, cpusets), capped by its cgroup CPU quota rounded up (docker --cpus, Kubernetes
    limits). Unlike os.cpu_count(), which counts the machine."""
    return _capi.cpu_count()


def default_decode_threads():
    """The decode threads a loader starts with decode_threads=0: cpu_count() divided by
    LOCAL_WORLD_SIZE (the ranks torchrun starts on this machine) when that is set, at least 1
    (and at most 1024). stats()["decode_threads"] reports what a loader started."""
    from ._config import _default_decode_threads
    return _default_decode_threads()


def cuda_device_count():
    """CUDA devices libringfeed can use (0 without a CUDA build, driver or GPU)."""
    return _capi.cuda_device_count()


def cuda_status():
    """(usable CUDA devices, why none / what there is): tells a missing NVIDIA driver, a driver
    too old for the runtime, a driver that sees no GPU, and a build without CUDA apart.
    Initializes the CUDA runtime, like cuda_device_count(): call it after any fork()."""
    return _capi.cuda_status()
