"""A loader's life at its edges, from Python (docs/python.md "Threads, interrupts and exit"):
a loader nobody references any more is closed (threads joined) even after a batch was taken
from it. Crashes are kept out of pytest's own process: those cases run in a child
interpreter."""
from conftest import run_python


# The child: loaders dropped after one batch (and one kept array), one after another: each
# one's threads end as the last reference goes, without close() or gc.collect(); the array
# stays readable, and once it goes too the loader is gone.
DROPPED = r"""
import gc, os, sys, weakref
import numpy as np
import ringfeed

pattern = sys.argv[1]
def threads():
    return len(os.listdir("/proc/self/task"))

alone = threads()
for i in range(5):
    ld = ringfeed.Loader(pattern, 4, size=32, device="cpu", decode_threads=2,
                         array_type="numpy", seed=i)
    b = next(iter(ld))
    img, ref = b.images, np.array(b.images, copy=True)
    gone = weakref.ref(ld)
    del ld, b
    assert gone() is None, "the Loader object outlived its last reference"
    assert threads() == alone, (i, threads(), alone)
    assert (img == ref).all()
    del img
gc.collect()
assert threads() == alone
print("ok")
"""


def test_dropped_loader_is_closed(shards):
    r = run_python(DROPPED, shards, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
