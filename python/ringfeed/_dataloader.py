"""A Loader's face to torch.utils.data (docs/python.md "torch's DataLoader, Lightning and
Accelerate"): once torch is imported, Loader and TokenLoader are IterableDatasets, so
`DataLoader(loader, batch_size=None)` yields ringfeed's batches unchanged; the ways of using
them that cannot work (worker processes, collating whole batches again) fail naming the fix.

torch is never imported here, so `import ringfeed` stays light: the classes are registered at
`import ringfeed` if torch is imported already, else when a loader is made, which imports torch
when it is importable. So every loader is an IterableDataset wherever torch is installed."""
import sys

_FIX = ("ringfeed decodes on threads of its own: use DataLoader(loader, batch_size=None) with "
        "num_workers=0 (the default), or iterate the loader itself")
_registered = False


def _torch_data():
    """torch.utils.data if torch is imported (whole, not halfway through its own import)."""
    torch = sys.modules.get("torch")
    return getattr(getattr(torch, "utils", None), "data", None)


def register(loader_base):
    """Make loader_base (the base of every loader class) an IterableDataset (virtually, through
    the ABC registry: the classes stay free of torch) and make default_collate refuse ringfeed
    batches by name. Does nothing until torch is imported; idempotent."""
    global _registered
    data = _torch_data()
    if _registered or data is None or not hasattr(data, "IterableDataset"):
        return
    from ._batch import _BatchBase
    data.IterableDataset.register(loader_base)
    # default_collate's table of types is torch's internal API: without it, batch_size=1 still
    # fails, only with torch's generic message.
    collate = getattr(getattr(data, "_utils", None), "collate", None)
    table = getattr(collate, "default_collate_fn_map", None)
    if isinstance(table, dict):
        table[_BatchBase] = _refuse_collate
    _registered = True


def _refuse_collate(batch, *, collate_fn_map=None):
    raise TypeError(
        f"DataLoader collates ringfeed batches into batches of batches (its batch_size "
        f"defaults to 1), but a ringfeed {type(batch[0]).__name__} is a whole batch already: "
        f"use DataLoader(loader, batch_size=None), or iterate the loader itself")


def check_process(loader):
    """Refuse iteration inside a DataLoader worker process (num_workers > 0): a loader belongs
    to the process that made it. Checked before any C call, since the C loader's threads were
    not forked along with it."""
    data = _torch_data()
    get = getattr(data, "get_worker_info", None)
    info = get() if get is not None else None
    if info is not None:
        raise RuntimeError(
            f"ringfeed.{type(loader).__name__} cannot be iterated in DataLoader worker "
            f"processes (num_workers={info.num_workers}): {_FIX}")


def refuse_pickle(loader):
    """A loader cannot be pickled: its C loader, threads and memory live in this process. The
    one who pickles one unasked is a DataLoader starting workers by spawn or forkserver."""
    raise TypeError(
        f"a ringfeed.{type(loader).__name__} cannot be pickled or copied (its threads and "
        f"memory live in this process); if DataLoader(num_workers=N) is starting worker "
        f"processes with it: {_FIX}")
