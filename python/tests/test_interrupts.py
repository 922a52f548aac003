"""A loader's life at its edges, from Python (docs/python.md "Threads, interrupts and exit"):
Ctrl-C at any moment of next() loses and repeats nothing; two threads calling next() on one
loader share its batches, each exactly once; a loader nobody references any more is closed
(threads joined) even after a batch was taken from it. Signals and crashes are kept out of
pytest's own process: those cases run in a child interpreter."""
import threading
import time

import numpy as np

import ringfeed
from conftest import N_IMAGES, run_python

KW = dict(size=32, device="cpu", decode_threads=2, array_type="numpy", seed=3)

# The child: SIGINT sent to its main thread every 0-0.5 ms by a thread of its own while it
# reads epochs through one loader (until 300 interrupts landed, at most 200 epochs), catching each KeyboardInterrupt and going on with the
# same iterator. The test's own code runs with the signal held back (its handler raises only
# while `armed`, i.e. inside the loop's FOR_ITER, which is ringfeed's next()), so every
# interrupt that lands lands in ringfeed. Prints how many interrupts were raised.
CTRL_C = r"""
import os, random, signal, sys, threading, time
import ringfeed

pattern, samples = sys.argv[1], int(sys.argv[2])
armed, hits = False, 0

def on_sigint(signum, frame):
    global hits
    if armed:
        hits += 1
        raise KeyboardInterrupt

signal.signal(signal.SIGINT, on_sigint)
stop = False
main = threading.main_thread().ident

def interrupter():
    rng = random.Random(7)
    while not stop:
        time.sleep(rng.random() * 0.0005)
        signal.pthread_kill(main, signal.SIGINT)

ld = ringfeed.Loader(pattern, 4, size=32, device="cpu", decode_threads=2, array_type="numpy",
                     seed=3, prefetch_depth=3)
t = threading.Thread(target=interrupter, daemon=True)
t.start()
epoch = 0
while hits < 300 and epoch < 200:
    epoch += 1
    keys = []
    it = iter(ld)
    while True:
        try:
            armed = True
            for b in it:
                armed = False
                keys.extend(k for k, pad in zip(b.keys, b.is_padding) if not pad)
                armed = True
            armed = False
            break
        except KeyboardInterrupt:
            armed = False
    assert len(keys) == samples and len(set(keys)) == samples, (epoch, len(keys), len(set(keys)))
stop = True
t.join()
ld.close()
print("interrupts", hits)
"""


def test_ctrl_c_in_next_loses_nothing(shards):
    """Thousands of SIGINTs while next() waits, leases, wraps or hands out a batch: each one
    is a KeyboardInterrupt, and the next call returns what the interrupted one would have,
    so every epoch holds every sample once and ends where it ends."""
    r = run_python(CTRL_C, shards, str(N_IMAGES), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert int(r.stdout.split()[-1]) >= 300, r.stdout  # the interrupts did land in next()


def test_two_threads_share_one_loader(shards):
    """Two threads taking batches from one iterator: each batch goes to one of them, none is
    lost or repeated, and the epoch ends for both without an error."""
    ld = ringfeed.Loader(shards, 2, prefetch_depth=2, **KW)
    it = iter(ld)
    got, errors = [[], []], []

    def take(i):
        try:
            for b in it:
                got[i].extend(k for k, pad in zip(b.keys, b.is_padding) if not pad)
        except Exception as e:  # noqa: BLE001  (the test reports whatever a thread met)
            errors.append(e)

    for _ in range(5):
        got[0].clear()
        got[1].clear()
        it = iter(ld)
        threads = [threading.Thread(target=take, args=(i,), daemon=True) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            assert not t.is_alive(), "a thread is still waiting in next() after 120 s"
        assert not errors, errors
        keys = got[0] + got[1]
        assert len(keys) == N_IMAGES and len(set(keys)) == N_IMAGES
    ld.close()


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


def test_arrays_of_two_threads_read_back(shards):
    """A batch taken by one thread stays intact while the other takes the next one: kept
    batches belong to the thread that kept them (the same bytes as a run on one thread)."""
    with ringfeed.Loader(shards, 4, shuffle=False, **KW) as ld:
        ref = {k: np.array(img, copy=True) for b in ld for k, img in zip(b.keys, b.images)}
    out, lock = {}, threading.Lock()
    with ringfeed.Loader(shards, 4, shuffle=False, prefetch_depth=4, **KW) as ld:
        it = iter(ld)

        def take():
            while True:
                try:
                    b = next(it)
                except StopIteration:
                    return
                except RuntimeError as e:  # the other thread's kept batch holds the next slot:
                    assert "kept batch" in str(e), e  # nothing was taken, ask again
                    time.sleep(0.001)
                    continue
                b.keep()
                with lock:
                    out.update((k, np.array(img, copy=True)) for k, img in zip(b.keys, b.images))
                b.release()

        threads = [threading.Thread(target=take, daemon=True) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            assert not t.is_alive(), "a thread is still waiting in next() after 120 s"
    assert sorted(out) == sorted(ref)
    assert all(np.array_equal(out[k], ref[k]) for k in ref)
