"""Batch memory after close(): arrays read after the loader was closed (or replaced by
load_state_dict), and close() from another thread while one iterates, must never crash the
interpreter. Each case runs in a child interpreter, so a segfault fails the test (a negative
return code) instead of killing pytest."""
import pytest

from conftest import N_IMAGES, have_torch, run_python

# The child: argv[1] the shards, argv[2] the array type, argv[3] the samples in them. Prints "ok" at the end; any wrong
# value is an AssertionError (exit 1), a crash a signal.
AFTER_CLOSE = r"""
import gc, os, sys
import numpy as np
import ringfeed

pattern, kind, samples = sys.argv[1], sys.argv[2], int(sys.argv[3])
kw = dict(size=64, device="cpu", decode_threads=2, seed=5, array_type=kind)
npy = (lambda x: x) if kind == "numpy" else (lambda x: x.numpy())

def threads():
    return len(os.listdir("/proc/self/task"))

alone = threads()
# 1. The usual loop, then the arrays of the last batch (returned to the ring by the loop's
# end, so not necessarily its pixels any more) read after the with block closed the loader:
# the threads are gone, the memory is there and nothing writes it.
with ringfeed.Loader(pattern, 8, **kw) as ld:
    for images, labels in ld:
        pass
assert threads() == alone
last = npy(images).copy()
assert (npy(images) == last).all()
# 2. A kept batch and the current one, read after close(); a view of a view too.
ld = ringfeed.Loader(pattern, 8, **kw)
it = iter(ld)
kept = next(it).keep()
cur = next(it)
ref_kept, ref_cur = npy(kept.images).copy(), npy(cur.images).copy()
crop = cur.images[1:3, :, 4:9]
ld.close()
assert (npy(kept.images) == ref_kept).all() and (npy(cur.images) == ref_cur).all()
assert (npy(crop) == ref_cur[1:3, :, 4:9]).all()
kept.release()  # after close: a no-op, not a call on a closed loader
assert kept.released and cur.released
# 3. load_state_dict replaces the C loader (after returning the batch): arrays of the old
# one stay readable while the new one runs.
ld = ringfeed.Loader(pattern, 8, **kw)
it = iter(ld)
old = next(it).images
state = ld.state_dict()
ld.load_state_dict(state)
n = 0
for b in ld:
    n += b.count
    float(npy(old).sum())
assert n == samples - 8, n
ld.close()
# Once nothing views them, every C loader is destroyed: its threads are gone.
del images, labels, last, kept, cur, crop, old, it, ld
gc.collect()
assert threads() == alone, (threads(), alone)
print("ok")
"""

CLOSE_FROM_THREAD = r"""
import random, sys, threading, time
import numpy as np
import ringfeed

pattern, kind, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
npy = (lambda x: x) if kind == "numpy" else (lambda x: x.numpy())
for r in range(rounds):
    # One decode thread on 160-px images: the consumer mostly waits inside rf_loader_next.
    ld = ringfeed.Loader(pattern, 4, size=160, device="cpu", decode_threads=1, seed=r,
                         array_type=kind)
    seen, errors = [], []

    def consume():
        try:
            while True:
                for b in ld:
                    seen.append(b.images)
                    float(npy(b.images).sum())  # reads the batch while close() may run
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(random.Random(r).uniform(0.0, 0.05))
    ld.close()
    t.join(10)
    assert not t.is_alive(), "the consumer did not stop after close()"
    assert len(errors) == 1 and "closed" in errors[0], errors
    for images in seen[-3:]:
        float(npy(images).sum())  # arrays of the last batches, read after close()
print("ok")
"""


def check(r):
    assert r.returncode == 0, f"child exited {r.returncode}: {r.stderr[-2000:]}"
    assert r.stdout.strip().endswith("ok"), r.stdout


ARRAYS = ["numpy"] + (["torch"] if have_torch() else [])


@pytest.mark.parametrize("kind", ARRAYS)
def test_arrays_read_after_close_see_the_batch(shards, kind):
    """numpy arrays (and torch tensors where torch is installed) of batches read after
    close(), after a with block, and after load_state_dict replaced the C loader: the batch's
    pixels, no crash; once no array is left the C loader is destroyed (its threads end)."""
    check(run_python(AFTER_CLOSE, shards, kind, str(N_IMAGES)))


@pytest.mark.parametrize("kind", ARRAYS)
def test_close_from_another_thread_while_iterating(shards, kind):
    """close() from another thread at random moments of an iteration (mostly while the
    consumer waits inside rf_loader_next): the consumer gets RuntimeError("... closed"), the
    arrays it holds stay readable, nothing crashes; 25 rounds."""
    check(run_python(CLOSE_FROM_THREAD, shards, kind, "25"))


@pytest.mark.skipif(not have_torch(), reason="torch not installed")
def test_cuda_tensors_after_close(shards):
    """CUDA batches: tensors read after close() hold the batch's values (the device pool
    outlives the loader while they exist)."""
    code = r"""
import sys, torch, ringfeed
if not torch.cuda.is_available() or ringfeed.cuda_device_count() == 0:
    print("skip"); sys.exit(0)
ld = ringfeed.Loader(sys.argv[1], 8, size=64, device="cuda", decode_threads=2, seed=5)
b = next(iter(ld))
ref = b.images.clone()
torch.cuda.synchronize()
ld.close()
assert torch.equal(b.images, ref)
torch.cuda.synchronize()
print("ok")
"""
    r = run_python(code, shards)
    if r.stdout.strip() == "skip":
        pytest.skip("no CUDA device")
    check(r)
