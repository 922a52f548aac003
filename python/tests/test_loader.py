"""CPU tests of ringfeed.Loader: shapes, dtypes, labels against the shards, keys, exactly-once,
state_dict, errors, the batch lifetime policy."""
import collections
import gc
import glob
import os
import pathlib
import time

import numpy as np
import pytest

import ringfeed
from ringfeed import _capi as C
from conftest import ARRAY_TYPES, N_IMAGES, have_torch, make_shards, run_python

KW = dict(size=24, device="cpu", decode_threads=2)


def npy(x):
    return x if isinstance(x, np.ndarray) else x.numpy()


def epoch_keys(loader):
    keys = []
    for b in loader:
        keys += [k for k, p in zip(b.keys, b.is_padding) if not p]
    return keys


@pytest.mark.parametrize("array_type", ARRAY_TYPES)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_shapes_dtypes(shards, layout, array_type):
    with ringfeed.Loader(shards, 8, layout=layout, array_type=array_type, **KW) as ld:
        batches = list(iter(ld))
        assert len(batches) == len(ld) == -(-N_IMAGES // 8)
        for b in batches[:-1]:
            want = (8, 3, 24, 24) if layout == "NCHW" else (8, 24, 24, 3)
            assert tuple(b.images.shape) == want
            assert str(b.images.dtype).endswith("uint8")
            assert tuple(b.labels.shape) == (8,)
            assert str(b.labels.dtype).endswith("int64")
            assert all(isinstance(k, str) for k in b.keys) and len(b.keys) == 8
        last = batches[-1]
        assert last.images.shape[0] == N_IMAGES - 8 * (len(batches) - 1) == last.count
        if array_type == "torch":
            import torch
            assert isinstance(last.images, torch.Tensor)
        else:
            assert isinstance(last.images, np.ndarray)


def test_metadata_is_owned_and_exact(shards):
    """sample_ids, positions and is_padding: uint64/uint64/bool copies of the C batch's arrays.
    In dataset order a sample's position is its index; over two ranks every index comes exactly
    once (the padding repeats real samples), and the arrays outlive the loader."""
    seen, kept = [], []
    for r in range(2):
        with ringfeed.Loader(shards, 8, shuffle=False, rank=r, world_size=2, array_type="numpy",
                             **KW) as ld:
            for b in ld:
                assert b.sample_ids.dtype == np.uint64 and b.positions.dtype == np.uint64
                assert b.is_padding.dtype == np.bool_
                assert len(b.sample_ids) == len(b.positions) == len(b.is_padding) == b.count
                real = ~b.is_padding
                assert (b.sample_ids[real] == b.positions[real]).all()
                assert (b.sample_ids < N_IMAGES).all()
                seen += [int(i) for i in b.sample_ids[real]]
                kept.append((b.sample_ids, b.sample_ids.copy()))
    assert sorted(seen) == list(range(N_IMAGES))
    for a, copy in kept:  # owned: unchanged after the ring was reused and the loader closed
        assert a.flags.writeable and (a == copy).all()


def _meta(b):
    return (list(b.keys), b.sample_ids.tolist(), b.positions.tolist(), b.is_padding.tolist(),
            b.fields)


@pytest.mark.parametrize("copy", [False, True])
def test_metadata_read_late_is_the_metadata_read_at_once(shards, copy):
    """Keys, ids, positions, padding and fields are copied out of the ring slot on first use:
    read after the batch went back to the ring (and the slot was refilled many times, and the
    loader closed) they are what reading them at once gave, also when only some were read
    before the release."""
    kw = dict(KW, seed=3, array_type="numpy", copy=copy)
    with ringfeed.Loader(shards, 8, **kw) as ld:
        at_once = [_meta(b) for b in ld]
    with ringfeed.Loader(shards, 8, **kw) as ld:
        late = []
        for i, b in enumerate(ld):
            if i % 3 == 1:
                b.keys  # one read before the release, the rest after
            elif i % 3 == 2:
                b.sample_ids
            late.append(b)
    assert len(late) == len(at_once) > ld.prefetch_depth
    assert [_meta(b) for b in late] == at_once


def test_metadata_read_from_another_thread_during_the_release(shards):
    """A thread reading a batch's metadata while the consumer thread moves on (and so copies
    what was not read and returns the slot) gets the batch's own values, never an error or
    another batch's: thread switches forced every microsecond, over three passes."""
    import sys
    import threading
    kw = dict(KW, seed=4, array_type="numpy")
    with ringfeed.Loader(shards, 4, **kw) as ld:
        want = [_meta(b) for b in ld]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(3):
            with ringfeed.Loader(shards, 4, **kw) as ld:
                batches, got, errors, done = [], {}, [], threading.Event()

                def read():
                    while not done.is_set() or len(got) < len(batches):
                        for i in range(len(batches)):
                            if i not in got:
                                try:
                                    got[i] = _meta(batches[i])
                                except Exception as e:  # noqa: BLE001 - the test's verdict
                                    errors.append(repr(e))
                                    return

                t = threading.Thread(target=read)
                t.start()
                for b in ld:
                    batches.append(b)
                done.set()
                t.join(30)
            assert not errors, errors[:3]
            assert [got[i] for i in range(len(want))] == want
    finally:
        sys.setswitchinterval(old)


def test_metadata_nobody_reads_is_never_copied(shards, monkeypatch):
    """The usual `for images, labels in loader` drops each Batch at once: none of its metadata
    is copied out of the slot (the training loop's thread pays for each copy, while the GPU
    waits for the next step)."""
    from ringfeed import loader as L
    made = []
    for name, make in list(L._META.items()):
        monkeypatch.setitem(L._META, name, lambda b, n, make=make, name=name:
                            made.append(name) or make(b, n))
    with ringfeed.Loader(shards, 8, array_type="numpy", **KW) as ld:
        n = sum(len(labels) for images, labels in ld)
        assert n == N_IMAGES and made == []
        b = next(iter(ld))
        assert len(b.keys) == 8 and made == ["_keys"]


def test_unpack_and_labels_match_shards(shards, labels_by_key):
    seen = 0
    with ringfeed.Loader(shards, 8, array_type="numpy", **KW) as ld:
        for batch in ld:
            images, labels = batch
            assert images is batch.images and labels is batch.labels
            for k, lab in zip(batch.keys, labels):
                assert labels_by_key[k] == int(lab), k
                seen += 1
            assert images.any(), "decoded images are not all zero"
    assert seen == N_IMAGES


@pytest.mark.parametrize("shuffle", [True, False])
def test_exactly_once_per_epoch(shards, labels_by_key, shuffle):
    with ringfeed.Loader(shards, 8, shuffle=shuffle, seed=3, **KW) as ld:
        e0, e1 = epoch_keys(ld), epoch_keys(ld)
    for keys in (e0, e1):
        assert sorted(keys) == sorted(labels_by_key)
        assert len(set(keys)) == len(keys)
    if shuffle:
        assert e0 != e1, "epochs should be permuted differently"
    else:
        assert e0 == e1 == sorted(labels_by_key)


def test_drop_last(shards):
    with ringfeed.Loader(shards, 8, drop_last=True, **KW) as ld:
        counts = [b.count for b in ld]
        assert counts == [8] * (N_IMAGES // 8) == [8] * len(ld)


def test_ranks_are_disjoint(shards, labels_by_key):
    per_rank = []
    for r in range(3):
        with ringfeed.Loader(shards, 4, rank=r, world_size=3, seed=5, **KW) as ld:
            ks = epoch_keys(ld)
            per_rank.append(ks)
            nb = len(ld)
    assert all(len(ld_keys) <= nb * 4 for ld_keys in per_rank)
    union = [k for ks in per_rank for k in ks]
    assert sorted(union) == sorted(labels_by_key), "every sample exactly once over the ranks"


def test_rank_from_environment(shards, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with ringfeed.Loader(shards, 4, seed=5, **KW) as ld:
        env_keys = epoch_keys(ld)
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    with ringfeed.Loader(shards, 4, seed=5, rank=1, world_size=2, **KW) as ld:
        assert epoch_keys(ld) == env_keys


def test_deterministic_across_thread_counts(shards):
    out = []
    for threads in (1, 3):
        with ringfeed.Loader(shards, 8, seed=9, array_type="numpy", size=24, device="cpu",
                             decode_threads=threads, copy=True) as ld:
            out.append([(b.keys, b.images) for b in ld])
    for (k0, i0), (k1, i1) in zip(*out):
        assert k0 == k1
        np.testing.assert_array_equal(i0, i1)


def test_default_decode_threads_are_the_allowed_cpus(shards):
    """decode_threads=0 starts one decode thread per CPU the process may use: under a one-CPU
    affinity mask (set in a child process, as taskset does) one thread, not one per CPU of
    the machine; every sample still arrives once."""
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_WORLD_SIZE"}
    r = run_python(
        "import os, sys, ringfeed\n"
        "os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])\n"
        "with ringfeed.Loader(sys.argv[1], 8, size=24, device='cpu') as ld:\n"
        "    keys = [k for b in ld for k in b.keys]\n"
        "    print(ringfeed.cpu_count(), ringfeed.default_decode_threads(),\n"
        "          ld.stats()['decode_threads'], len(keys), len(set(keys)))\n",
        shards, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "1", "1", str(N_IMAGES), str(N_IMAGES)]


def test_local_world_size_divides_default_decode_threads(shards, monkeypatch):
    """Under torchrun every rank of a machine shares its CPUs: LOCAL_WORLD_SIZE divides the
    default (at least one thread); a bad value is a ValueError naming the variable."""
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    cpus = ringfeed.cpu_count()
    assert 1 <= cpus <= len(os.sched_getaffinity(0))
    assert ringfeed.default_decode_threads() == cpus
    for ranks in (2, 64):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(ranks))
        want = max(1, cpus // ranks)
        assert ringfeed.default_decode_threads() == want
        with ringfeed.Loader(shards, 8, size=24, device="cpu") as ld:
            assert ld.stats()["decode_threads"] == want
        with ringfeed.Loader(shards, 8, size=24, device="cpu", decode_threads=3) as ld:
            assert ld.stats()["decode_threads"] == 3  # an explicit count is kept
    for bad in ("0", "two"):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", bad)
        with pytest.raises(ValueError, match="LOCAL_WORLD_SIZE"):
            ringfeed.Loader(shards, 8, size=24, device="cpu")


def test_set_epoch(shards):
    with ringfeed.Loader(shards, 8, seed=2, **KW) as ld:
        e0, e1 = epoch_keys(ld), epoch_keys(ld)
        ld.set_epoch(0)
        assert epoch_keys(ld) == e0
        ld.set_epoch(1)  # already at epoch 1's start: a no-op
        assert epoch_keys(ld) == e1
        it = iter(ld)
        next(it)
        ld.set_epoch(1)  # mid-epoch: restarts epoch 1
        assert epoch_keys(ld) == e1
        assert ld.epoch == 2


def epochs_of_keys(shards, epochs, batch, **kw):
    """Each epoch's batches (their keys) from an uninterrupted loader."""
    with ringfeed.Loader(shards, batch, **kw) as ld:
        out = []
        for epoch in range(epochs):
            ld.set_epoch(epoch)
            out.append([list(b.keys) for b in ld])
        return out


def test_resume_with_the_readme_loop_continues_the_epoch(shards):
    """The README's loop after load_state_dict: set_epoch of the restored epoch continues at
    the saved batch (it restarted the epoch: 13 batches instead of the 9 left), and the next
    epochs are the uninterrupted run's. Saved mid-epoch 0 (looped from 0, as written, and
    from loader.epoch), mid-epoch 1, and right after epoch 0's last batch (the state then
    resumes at epoch 1)."""
    kw = dict(KW, seed=13)
    full = epochs_of_keys(shards, 3, 4, **kw)
    per = len(full[0])
    for save_epoch, save_after in ((0, 4), (1, 6), (0, per)):
        with ringfeed.Loader(shards, 4, **kw) as ld:
            ld.set_epoch(save_epoch)
            it = iter(ld)
            before = [list(next(it).keys) for _ in range(save_after)]
            sd = ld.state_dict()
        at_end = save_after == per
        assert sd["epoch"] == save_epoch + at_end
        assert sd["batches_in_epoch"] == (0 if at_end else save_after)
        starts = [None, 0] if (save_epoch, save_after) == (0, 4) else [None]
        for start in starts:
            with ringfeed.Loader(shards, 4, **kw) as loader:
                loader.load_state_dict(sd)
                assert loader.epoch == sd["epoch"]
                got = {}
                for epoch in range(loader.epoch if start is None else start, 3):
                    loader.set_epoch(epoch)
                    got[epoch] = [list(b.keys) for b in loader]
            if at_end:
                assert before == full[save_epoch] and sorted(got) == [save_epoch + 1, 2]
            else:
                assert len(got[save_epoch]) == per - save_after
                assert before + got[save_epoch] == full[save_epoch]
            for epoch in range(sd["epoch"] + (not at_end), 3):
                assert got[epoch] == full[epoch]


def test_resume_with_the_torchrun_example_loop(shards, monkeypatch):
    """python/examples/train_resnet.py's batch generator under torchrun (RANK / WORLD_SIZE /
    LOCAL_WORLD_SIZE from the environment, two ranks): a rank that saves its state after 3
    batches and resumes in a new loader yields, from `epoch = ld.epoch` on, exactly the
    batches of an uninterrupted run, across the epoch boundaries that follow."""
    def example_batches(ld, n):
        # the example's loop: epoch = ld.epoch; while True: set_epoch; for ...: yield; +1
        out, epoch = [], ld.epoch
        while True:
            ld.set_epoch(epoch)
            for b in ld:
                out.append((b.epoch, list(b.keys), b.is_padding.tolist()))
                if len(out) == n:
                    return out
            epoch += 1

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    kw = dict(size=24, device="cpu", seed=17, drop_last=True)
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        with ringfeed.Loader(shards, 4, **kw) as ld:
            whole = example_batches(ld, 20)
        with ringfeed.Loader(shards, 4, **kw) as ld:
            first = example_batches(ld, 3)
            state = ld.state_dict()
        with ringfeed.Loader(shards, 4, **kw) as ld:
            ld.load_state_dict(state)
            rest = example_batches(ld, 17)
        assert first + rest == whole
        assert [e for e, _, _ in whole].count(0) == len(ld) == 6


def test_interrupted_iteration_continues_epoch(shards):
    with ringfeed.Loader(shards, 8, seed=4, **KW) as ld:
        full = epoch_keys(ld)
        ld.set_epoch(0)
        first = []
        for i, b in enumerate(ld):
            first += b.keys
            if i == 2:
                break
        rest = epoch_keys(ld)
        assert first + rest == full
        # Stopping right after the last batch (without seeing the end) and iterating again
        # starts the next epoch instead of yielding an empty one.
        ld.set_epoch(0)
        it = iter(ld)
        for _ in range(len(ld)):
            next(it)
        nxt = epoch_keys(ld)
        assert sorted(nxt) == sorted(full) and ld.epoch == 2


@pytest.mark.parametrize("new_world", [1, 2])
def test_state_dict_round_trip(shards, labels_by_key, new_world):
    # Two ranks consume 2 batches each, save, and the run resumes with `new_world` ranks: the
    # samples seen before and after cover the epoch exactly once.
    before, states = [], []
    for r in range(2):
        with ringfeed.Loader(shards, 4, rank=r, world_size=2, seed=7, **KW) as ld:
            it = iter(ld)
            for _ in range(2):
                before += next(it).keys
            st = ld.state_dict()
            assert st["version"] == 1 and isinstance(st["blob"], bytes)
            assert st["epoch"] == 0 and st["batches_in_epoch"] == 2
            states.append(st)
    assert states[0]["blob"] == states[1]["blob"] or True  # per-rank blobs may differ
    after = []
    for r in range(new_world):
        with ringfeed.Loader(shards, 4, rank=r, world_size=new_world, seed=7, **KW) as ld:
            ld.load_state_dict(states[0])
            after += epoch_keys(ld)
            assert ld.epoch == 1 or ld.epoch is None
    assert sorted(before + after) == sorted(labels_by_key)


def test_state_dict_same_world_same_batches(shards):
    with ringfeed.Loader(shards, 8, seed=11, **KW) as ld:
        it = iter(ld)
        next(it), next(it)
        st = ld.state_dict()
        rest = [b.keys for b in it]
        nxt = epoch_keys(ld)
    with ringfeed.Loader(shards, 8, seed=11, **KW) as ld2:
        ld2.load_state_dict(st)
        assert [b.keys for b in ld2] == rest
        assert epoch_keys(ld2) == nxt


def test_state_at_epoch_end_resumes_next_epoch(shards):
    with ringfeed.Loader(shards, 8, seed=11, **KW) as ld:
        epoch_keys(ld)
        st = ld.state_dict()
        e1 = epoch_keys(ld)
    with ringfeed.Loader(shards, 8, seed=11, **KW) as ld2:
        ld2.load_state_dict(st)
        assert epoch_keys(ld2) == e1


# ---- errors ----------------------------------------------------------------------------------

def test_no_files_error_names_pattern(tmp_path):
    with pytest.raises(ringfeed.RingfeedError) as ei:
        ringfeed.Loader(str(tmp_path / "nothing-*.tar"), 4, **KW)
    assert ei.value.code == C.RF_ENOFILES
    assert "nothing-" in str(ei.value) and ei.value.detail


def test_corrupt_shard_error_has_message(tmp_path):
    pattern = make_shards(str(tmp_path), 8, 3, 8)
    path = pattern.replace("*", "000000")
    data = bytearray(open(path, "rb").read())
    # Overwrite the first JPEG's payload (after the first 512-byte header) with garbage.
    data[512 + 200:512 + 1200] = b"\x55" * 1000
    open(path, "wb").write(bytes(data))
    with pytest.raises(ringfeed.RingfeedError) as ei:
        with ringfeed.Loader(pattern, 4, shuffle=False, **KW) as ld:
            for _ in ld:
                pass
    e = ei.value
    assert e.code < 0 and e.detail, str(e)
    assert "train-000000.tar" in str(e)


def test_truncated_shard_error(tmp_path):
    pattern = make_shards(str(tmp_path), 8, 3, 8)
    path = pattern.replace("*", "000000")
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 2 + 100])
    with pytest.raises(ringfeed.RingfeedError) as ei:
        with ringfeed.Loader(pattern, 4, **KW) as ld:
            for _ in ld:
                pass
    assert ei.value.detail and "train-000000" in str(ei.value)


def test_bad_resume_blob(shards):
    with ringfeed.Loader(shards, 8, **KW) as ld:
        st = ld.state_dict()
        bad = dict(st, blob=b"\x00" * len(st["blob"]))
        with pytest.raises(ringfeed.RingfeedError) as ei:
            ld.load_state_dict(bad)
        assert ei.value.code == C.RF_ERESUME and ei.value.detail


def test_argument_errors(shards):
    with pytest.raises(ValueError):
        ringfeed.Loader(shards, 8, crop="middle", **KW)
    with pytest.raises(ValueError):
        ringfeed.Loader(shards, 8, layout="CHW", **KW)
    with pytest.raises(ValueError):
        ringfeed.Loader(shards, 8, dtype="float64", **KW)
    with pytest.raises(ValueError):
        ringfeed.Loader(shards, 8, rank=2, world_size=2, **KW)
    with pytest.raises(ValueError, match="on_error"):
        ringfeed.Loader(shards, 8, on_error="ignore", **KW)
    with pytest.raises(ValueError, match="0..255"):
        ringfeed.Loader(shards, 8, dtype="float32", mean=(0.485, 0.456, 0.406),
                        std=(0.229, 0.224, 0.225), **KW)
    with pytest.raises(ValueError):
        ringfeed.Loader(shards, 8, device="tpu", size=24)
    with pytest.raises(ringfeed.RingfeedError) as ei:
        ringfeed.Loader(shards, 8, prefetch_depth=1000, **KW)
    assert ei.value.code == C.RF_EINVAL and "prefetch_depth" in str(ei.value)


@pytest.mark.parametrize("arg, value", [
    ("batch_size", 2**32 + 4), ("world_size", 2**32 + 1), ("rank", 2**32), ("size", 2**32 + 24),
    ("decode_threads", 2**32 + 1), ("io_threads", 2**32), ("prefetch_depth", 2**33 + 2),
    ("decode_nice", 2**32), ("gpu_decode_percent", 2**32 + 50), ("hw_decode_percent", -1),
    ("seed", -1), ("seed", 2**64), ("start_epoch", 2**64 + 3), ("batch_size", 0),
    ("world_size", 0)])
def test_integer_arguments_are_range_checked(shards, arg, value):
    """An integer past its rf_config field raises a ValueError naming the argument (ctypes
    would keep the low bits: batch_size=2**32+4 loaded batches of 4)."""
    kw = dict(KW, batch_size=8)
    kw[arg] = value
    with pytest.raises(ValueError, match=f"^{arg}={value} is out of range"):
        ringfeed.Loader(shards, **kw)


def test_integer_arguments_from_anywhere_are_checked(shards, token_file_any, monkeypatch):
    """Non-integers are a TypeError (not truncated), numpy integers are integers, and the
    environment's RANK / WORLD_SIZE, TokenLoader's sizes and add_restarts' interval get the
    same check."""
    with pytest.raises(TypeError, match="batch_size must be an integer, not 8.5"):
        ringfeed.Loader(shards, 8.5, **KW)
    with pytest.raises(TypeError, match="seed must be an integer"):
        ringfeed.Loader(shards, 8, seed="1", **KW)
    with ringfeed.Loader(shards, np.int64(8), seed=np.uint64(2**64 - 1), **KW) as ld:
        assert ld.batch_size == 8 and next(iter(ld)).count == 8
    monkeypatch.setenv("WORLD_SIZE", str(2**32 + 1))
    with pytest.raises(ValueError, match="world_size=4294967297 is out of range"):
        ringfeed.Loader(shards, 8, **KW)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "one")
    with pytest.raises(ValueError, match="RANK='one' is not an integer"):
        ringfeed.Loader(shards, 8, **KW)
    for kw in (dict(seq_len=2**32 + 63), dict(token_bytes=2**32 + 2),
               dict(batch_size=2**32 + 16)):
        args = dict(dict(token_bytes=2, seq_len=63, batch_size=16), **kw)
        name = next(iter(kw))
        with pytest.raises(ValueError, match=f"^{name}="):
            ringfeed.TokenLoader(token_file_any, device="cpu", rank=0, world_size=1, **args)
    for device in (2**31, f"cuda:{2**32}"):
        with pytest.raises(ValueError, match="device=.* is out of range"):
            ringfeed.Loader(shards, 8, device=device, size=24, rank=0, world_size=1)
    with pytest.raises(ValueError, match="interval=4294967296 is out of range"):
        ringfeed.add_restarts(b"\xff\xd8", interval=2**32)


@pytest.fixture
def token_file_any(tmp_path):
    p = tmp_path / "t.bin"
    np.arange(1000, dtype=np.uint16).tofile(p)
    return str(p)


def copy_shards(pattern, into):
    """The shards of `pattern` copied into the folder `into` (str or bytes); returns the
    copies' pattern in the folder's type."""
    os.makedirs(into)
    for path in glob.glob(pattern):
        name = os.path.basename(path)
        with open(path, "rb") as src, \
                open(os.path.join(into, os.fsencode(name) if isinstance(into, bytes) else name),
                     "wb") as dst:
            dst.write(src.read())
    return os.path.join(into, b"train-*.tar" if isinstance(into, bytes) else "train-*.tar")


def test_paths_bytes_pathlike_non_utf8_and_nul(shards, tmp_path, labels_by_key):
    """Shard paths are os.fsencode()d: a folder whose name is not UTF-8 loads through bytes,
    through str (surrogate escapes, as os.listdir gives it) and through pathlib; a NUL in a
    path is a ValueError instead of loading the file named by the part before it."""
    folder = os.path.join(os.fsencode(str(tmp_path)), b"caf\xe9-\xff")  # Latin-1: not UTF-8
    pattern = copy_shards(shards, folder)
    one = sorted(glob.glob(pattern))[0]
    for pat in (pattern, os.fsdecode(pattern), [pathlib.Path(os.fsdecode(p))
                                                for p in sorted(glob.glob(pattern))]):
        with ringfeed.Loader(pat, 8, shuffle=False, **KW) as ld:
            assert sorted(epoch_keys(ld)) == sorted(labels_by_key)
    for bad in (one + b"\0junk", os.fsdecode(one) + "\0.idx"):
        with pytest.raises(ValueError, match="contains a NUL byte"):
            ringfeed.Loader(bad, 8, **KW)
    with pytest.raises(TypeError, match="shard path must be"):
        ringfeed.Loader([shards, 3], 8, **KW)


def test_dtypes_as_strings_torch_and_numpy_and_enums_in_any_case(shards):
    """dtype may be a string in any case, a numpy dtype or a torch dtype; enum strings (layout,
    crop, on_error, io_engine, array_type, device) any case: the same batches as the
    canonical spellings."""
    def first(**kw):
        try:
            with ringfeed.Loader(shards, 8, seed=21, size=24, decode_threads=2, copy=True,
                                 **kw) as ld:
                return ld, next(iter(ld)).images
        except RuntimeError as e:
            if "does not support that output type" in str(e):
                pytest.skip(str(e))
            raise
    ref_ld, ref = first(dtype="float32", mean=ringfeed.IMAGENET_MEAN, std=ringfeed.IMAGENET_STD,
                        layout="NHWC", crop="center", device="cpu", array_type="numpy")
    variants = [np.float32, np.dtype("float32"), "FLOAT32", "Float32"]
    for dt in variants:
        ld, got = first(dtype=dt, mean=ringfeed.IMAGENET_MEAN, std=ringfeed.IMAGENET_STD,
                        layout="nhwc", crop="CENTER", device="CPU", array_type="NumPy",
                        on_error="FAIL", io_engine="Auto")
        assert ld.dtype == "float32" and ld.layout == "NHWC" == ref_ld.layout
        assert got.dtype == np.float32 and got.shape == (8, 24, 24, 3)
        np.testing.assert_array_equal(got, ref)
    if have_torch():
        import torch
        ld, got = first(dtype=torch.float32, mean=ringfeed.IMAGENET_MEAN,
                        std=ringfeed.IMAGENET_STD, layout="nhwc", crop="center", device="cpu",
                        array_type="torch")
        np.testing.assert_array_equal(got.numpy(), ref)
        norm = dict(mean=ringfeed.IMAGENET_MEAN, std=ringfeed.IMAGENET_STD, device="cpu",
                    array_type="torch")
        ld, bf = first(dtype=torch.bfloat16, **norm)
        _, by_name = first(dtype="BFloat16", **norm)
        assert ld.dtype == "bfloat16" and bf.dtype == torch.bfloat16
        assert torch.equal(bf, by_name)
    for bad in (np.float64, "float64", object(), None):
        with pytest.raises(ValueError, match="dtype must be one of"):
            ringfeed.Loader(shards, 8, dtype=bad, **KW)
    with pytest.raises(ValueError, match="layout must be one of.*any case"):
        ringfeed.Loader(shards, 8, layout="hwc", **KW)


def test_closed_loader(shards):
    ld = ringfeed.Loader(shards, 8, **KW)
    ld.close()
    ld.close()
    with pytest.raises(RuntimeError):
        iter(ld)
    with pytest.raises(RuntimeError):
        ld.state_dict()


# ---- batch lifetime --------------------------------------------------------------------------

def reference_images(shards, **kw):
    with ringfeed.Loader(shards, 8, seed=21, copy=True, array_type="numpy", **KW, **kw) as ld:
        return [np.array(b.images) for b in ld]


def test_usual_loop_never_reads_recycled_buffer(shards):
    """A slow consumer holds each batch while the ring keeps filling behind it: the data it
    reads at the end of its step is still the batch it was given (compared with owned copies
    from an identical loader)."""
    ref = reference_images(shards)
    with ringfeed.Loader(shards, 8, seed=21, prefetch_depth=2, array_type="numpy", **KW) as ld:
        for i, (images, labels) in enumerate(ld):
            np.testing.assert_array_equal(images, ref[i])
            time.sleep(0.02)  # let decode threads run ahead into the free slot
            np.testing.assert_array_equal(images, ref[i])


def test_kept_batches_survive_and_release(shards):
    ref = reference_images(shards)
    with ringfeed.Loader(shards, 8, seed=21, prefetch_depth=4, array_type="numpy", **KW) as ld:
        it = iter(ld)
        kept = next(it).keep()
        for _ in range(2):  # within prefetch_depth - 1 batches
            next(it)
            time.sleep(0.02)
        np.testing.assert_array_equal(kept.images, ref[0])
        kept.release()
        kept.release()  # idempotent
        assert kept.released
        rest = list(it)
        assert len(rest) == len(ld) - 3


def test_kept_batch_released_by_gc(shards):
    with ringfeed.Loader(shards, 8, seed=21, prefetch_depth=2, **KW) as ld:
        it = iter(ld)
        next(it).keep()  # dropped at once: released by the garbage collector
        gc.collect()
        assert len(list(it)) == len(ld) - 1


@pytest.mark.parametrize("array_type", ARRAY_TYPES)
def test_arrays_are_handed_out_again_for_later_batches_at_their_memory(shards, array_type):
    """The ring's slots are at fixed addresses: a later batch in the same slot gets the same
    array object (no new tensor on the training loop's thread), holding that batch's pixels."""
    ref = reference_images(shards)
    with ringfeed.Loader(shards, 8, seed=21, prefetch_depth=2, array_type=array_type,
                         **KW) as ld:
        seen = []  # the objects themselves (alive, so no id is reused)
        for i, (images, labels) in enumerate(ld):
            seen.append(images)
            np.testing.assert_array_equal(npy(images), ref[i])
        assert i + 1 == len(ref) >= 4
        # Two slots: two objects, and a third for the shorter last batch.
        assert len({id(a) for a in seen}) == 3


@pytest.mark.parametrize("array_type", ARRAY_TYPES)
def test_a_kept_batchs_arrays_are_never_handed_out_again(shards, array_type):
    """keep() takes the batch's arrays out of reuse: later batches get other objects, the kept
    pixels stay, and the arrays alone hold the batch (released once they are garbage)."""
    ref = reference_images(shards)
    with ringfeed.Loader(shards, 8, seed=21, prefetch_depth=3, array_type=array_type,
                         **KW) as ld:
        it = iter(ld)
        kept = next(it).keep()
        images = kept.images
        del kept
        gc.collect()  # the batch object is gone; its images still hold its slot
        for i in (1, 2):
            b = next(it)
            assert b.images is not images
            np.testing.assert_array_equal(npy(b.images), ref[i])
            np.testing.assert_array_equal(npy(images), ref[0])
        # The kept slot is still held: one more batch would need it.
        with pytest.raises(RuntimeError, match="kept batch"):
            next(it)
        del images, b
        gc.collect()  # now the kept batch goes back to the ring
        n = 3
        for b in it:
            np.testing.assert_array_equal(npy(b.images), ref[n])
            n += 1
        assert n == len(ref)


@pytest.mark.parametrize("array_type", ARRAY_TYPES)
def test_an_array_changed_in_place_is_not_handed_out_again(shards, array_type):
    """A caller may reshape an array in place (numpy's .shape =, torch's unsqueeze_) or make a
    float tensor require grad: the next batch at that memory gets a fresh array, right shape."""
    ref = reference_images(shards)
    dtype = "float32" if array_type == "torch" else "uint8"
    with ringfeed.Loader(shards, 8, seed=21, prefetch_depth=2, array_type=array_type,
                         dtype=dtype, **KW) as ld:
        for i, (images, labels) in enumerate(ld):
            assert tuple(images.shape) == ref[i].shape, i
            got = npy(images.detach()) if array_type == "torch" else images
            np.testing.assert_array_equal(got, ref[i].astype(dtype))
            if array_type == "torch":
                if i % 2:
                    images.unsqueeze_(0)
                else:
                    images.requires_grad_()
            else:
                images.shape = (-1,)


def test_holding_kept_batches_raises_instead_of_deadlock(shards):
    with ringfeed.Loader(shards, 8, seed=21, prefetch_depth=2, **KW) as ld:
        it = iter(ld)
        kept = next(it).keep()
        next(it)
        with pytest.raises(RuntimeError, match="kept batch"):
            next(it)
        kept.release()
        assert next(it).count == 8
        with pytest.raises(RuntimeError, match="kept"):
            b = next(it).keep()
            ld.set_epoch(3)
        b.release()
        ld.set_epoch(3)


def test_keep_after_release_is_an_error(shards):
    with ringfeed.Loader(shards, 8, **KW) as ld:
        it = iter(ld)
        b = next(it)
        next(it)
        with pytest.raises(RuntimeError, match="already returned"):
            b.keep()


def test_copy_mode_batches_own_memory(shards):
    ref = reference_images(shards)
    with ringfeed.Loader(shards, 8, seed=21, copy=True, prefetch_depth=2, array_type="numpy",
                         **KW) as ld:
        held = list(ld)
    for b, r in zip(held, ref):
        assert b.released
        np.testing.assert_array_equal(b.images, r)


@pytest.mark.skipif(not have_torch(), reason="torch not installed")
def test_torch_cpu_bfloat16_and_float(shards):
    import torch
    try:
        ld = ringfeed.Loader(shards, 8, seed=21, dtype="float32", mean=ringfeed.IMAGENET_MEAN,
                             std=ringfeed.IMAGENET_STD, **KW)
        b = next(iter(ld))
    except RuntimeError as e:
        if "does not support that output type" in str(e):
            pytest.skip(str(e))
        raise
    ref = torch.from_numpy(reference_images(shards)[0]).float()
    mean = torch.tensor(ringfeed.IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(ringfeed.IMAGENET_STD).view(1, 3, 1, 1)
    torch.testing.assert_close(b.images, (ref - mean) / std, atol=1e-4, rtol=1e-5)
    ld.close()


def test_float_dtype_numpy(shards):
    try:
        ld = ringfeed.Loader(shards, 8, seed=21, dtype="float32", mean=ringfeed.IMAGENET_MEAN,
                             std=ringfeed.IMAGENET_STD, array_type="numpy", **KW)
        b = next(iter(ld))
    except RuntimeError as e:
        if "does not support that output type" in str(e):
            pytest.skip(str(e))
        raise
    ref = reference_images(shards)[0].astype(np.float32)
    mean = np.array(ringfeed.IMAGENET_MEAN, np.float32).reshape(1, 3, 1, 1)
    std = np.array(ringfeed.IMAGENET_STD, np.float32).reshape(1, 3, 1, 1)
    assert b.images.dtype == np.float32
    np.testing.assert_allclose(b.images, (ref - mean) / std, atol=1e-4, rtol=1e-5)
    ld.close()


def test_bfloat16_cpu_without_torch_is_refused(shards):
    with pytest.raises(ValueError, match="bfloat16"):
        ringfeed.Loader(shards, 8, dtype="bfloat16", array_type="numpy", **KW)


def test_stats(shards):
    with ringfeed.Loader(shards, 8, **KW) as ld:
        n = sum(b.count for b in ld)
        st = ld.stats()
        assert st["samples_delivered"] == n and st["device"] == "host"
        assert st["io_engine"] in ("io_uring", "pread")


def test_add_restarts_same_batches_via_region_decode(shards, restart_shards):
    """Shards rewritten with ringfeed.add_restarts load to the very same pixels, while the
    loader decodes crops as regions; non-JPEG bytes raise with libjpeg's words."""
    got = {}
    for name, pattern in (("plain", shards), ("restart", restart_shards)):
        with ringfeed.Loader(pattern, 8, seed=9, array_type="numpy", size=24, device="cpu",
                             decode_threads=2, copy=True) as ld:
            got[name] = [(b.keys, b.images) for b in ld]
            got[name + "_regions"] = ld.stats()["region_decoded"]
    for (k0, i0), (k1, i1) in zip(got["plain"], got["restart"]):
        assert k0 == k1
        np.testing.assert_array_equal(i0, i1)
    assert got["plain_regions"] == 0 and got["restart_regions"] > 0
    with pytest.raises(ringfeed.RingfeedError, match="add_restarts.*restart transcode"):
        ringfeed.add_restarts(b"\xff\xd8\xff\xdb\x00\x02garbage")


def test_gpu_decode_percent_splits_by_seed(restart_shards):
    """gpu_decode_percent sends about that share of the images to the GPU path (here the
    kernels' code on the host) and the rest to the CPU path, with the same pixels whatever the
    thread count (tests/test_loader.c checks each sample's path); out-of-range values are
    refused."""
    got = []
    for threads in (1, 3):
        with ringfeed.Loader(restart_shards, 8, seed=4, array_type="numpy", size=96,
                             device="cpu", decode_threads=threads, copy=True,
                             gpu_decode=True, gpu_decode_percent=40) as ld:
            got.append([b.images for b in ld])
            st = ld.stats()  # (counts include batches prefetched past the epoch)
        assert 0.2 < st["gpu_decoded"] / st["samples_decoded"] < 0.6
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ringfeed.RingfeedError) as ei:
        ringfeed.Loader(restart_shards, 8, device="cpu", gpu_decode=True, gpu_decode_percent=101)
    assert "gpu_decode_percent" in str(ei.value)


def test_hw_decode_percent_on_host_backend(shards):
    """hw_decode_percent on the CPU: the engine packets are decoded by libjpeg and the GPU
    kernels' resize code (tests/test_loader.c checks each sample's pixels); about that share
    of plain-shard images takes the path, whatever the thread count, and bad values raise."""
    got = []
    for threads in (1, 3):
        with ringfeed.Loader(shards, 8, seed=4, array_type="numpy", size=96, device="cpu",
                             decode_threads=threads, copy=True, hw_decode_percent=50) as ld:
            got.append([(b.keys, b.images) for b in ld])
            st = ld.stats()
        assert 0.25 < st["hw_decoded"] / st["samples_decoded"] < 0.75
        assert st["gpu_decoded"] == 0
    for (k0, a), (k1, b) in zip(*got):
        assert k0 == k1
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ringfeed.RingfeedError) as ei:
        ringfeed.Loader(shards, 8, device="cpu", hw_decode_percent=101)
    assert "hw_decode_percent 101 out of range" in str(ei.value)


def test_gpu_decode_on_host_backend(restart_shards, labels_by_key):
    """gpu_decode=True on the CPU runs the GPU kernels' code on the decode threads: restart-
    marked images take that path, every sample arrives once with its label, and the pixels do
    not depend on the thread count."""
    got = []
    for threads in (1, 3):
        with ringfeed.Loader(restart_shards, 8, seed=4, array_type="numpy", size=96,
                             device="cpu", decode_threads=threads, copy=True,
                             gpu_decode=True) as ld:
            got.append([(b.keys, b.images, b.labels) for b in ld])
            st = ld.stats()
        assert st["gpu_decoded"] > st["samples_decoded"] // 2
        assert st["gpu_plain_decoded"] == 0
    keys = [k for ks, _, _ in got[0] for k in ks]
    assert sorted(keys) == sorted(labels_by_key)
    for (k0, i0, l0), (k1, i1, l1) in zip(*got):
        assert k0 == k1
        np.testing.assert_array_equal(i0, i1)
        assert [labels_by_key[k] for k in k0] == list(l0)


def settled_stats(ld, timeout=10.0):
    """ld.stats() once the decode counters stop moving: after an epoch the pipeline goes on
    decoding the next one until its ring is full, and a sample is counted in gpu_decoded or
    dct_scaled before samples_decoded, so only a settled loader's counts add up exactly."""
    keys = ("samples_decoded", "gpu_decoded", "hw_decoded", "dct_scaled")
    last, deadline = None, time.monotonic() + timeout
    while True:
        st = ld.stats()
        now = tuple(st[k] for k in keys)
        if now == last or time.monotonic() > deadline:
            return st
        last = now
        time.sleep(0.05)


def images_by_key(shards, size, **kw):
    """One epoch of a host loader (seed 4, batches of 8, 2 threads): each real sample's image by
    key, and the loader's stats once settled (they include what was decoded of the next epoch)."""
    out = {}
    with ringfeed.Loader(shards, 8, seed=4, array_type="numpy", size=size, device="cpu",
                         decode_threads=2, copy=True, **kw) as ld:
        for b in ld:
            for k, img, pad in zip(b.keys, b.images, b.is_padding):
                if not pad:
                    out[k] = np.asarray(img).copy()
        return out, settled_stats(ld)


def test_gpu_decode_plain_shards_on_host_backend(shards):
    """gpu_decode=True on plain shards (no restart markers) on the CPU: every image becomes a
    plain packet (the walker's segments, decoded by the kernels' code), counted in both
    gpu_decoded and gpu_plain_decoded, and each is byte for byte what a CPU-only run with
    dct_scaling=False gives."""
    gpu, st = images_by_key(shards, 96, gpu_decode=True)
    cpu, _ = images_by_key(shards, 96, dct_scaling=False)
    # every image a plain packet (the counts include what was prefetched of the next epoch)
    assert st["gpu_plain_decoded"] == st["gpu_decoded"] >= len(gpu) == N_IMAGES
    assert sorted(gpu) == sorted(cpu)
    for k in gpu:
        np.testing.assert_array_equal(gpu[k], cpu[k])


def test_dct_scaling_always(shards):
    """dct_scaling="always" is rf_config.dct_scaling ON: with gpu_decode the crops the CPU
    DCT-scales stay on the CPU, scaled, so every image is byte for byte what a CPU-only loader
    with the default (True) gives, and only the others become packets; True with gpu_decode
    decodes every image at full scale instead. Another string is a ValueError."""
    cpu, cst = images_by_key(shards, 24)
    kept, kst = images_by_key(shards, 24, gpu_decode=True, dct_scaling="always")
    full, fst = images_by_key(shards, 24, gpu_decode=True)
    assert cst["dct_scaled"] > 0 and kst["dct_scaled"] > 0 and fst["dct_scaled"] == 0
    # every image decoded either DCT-scaled on the CPU or as a packet; without "always" all
    # are packets (counted over the same, settled, samples: comparing two loaders' counts
    # would compare how far each had gone into the next epoch)
    assert kst["gpu_decoded"] > 0
    assert kst["gpu_decoded"] + kst["dct_scaled"] == kst["samples_decoded"]
    assert fst["gpu_decoded"] == fst["samples_decoded"] >= len(full) == len(cpu)
    assert sorted(kept) == sorted(cpu)
    for k in cpu:
        np.testing.assert_array_equal(kept[k], cpu[k])
    assert any(not np.array_equal(full[k], cpu[k]) for k in cpu)
    with pytest.raises(ValueError, match='dct_scaling must be True, False or "always"'):
        ringfeed.Loader(shards, 8, device="cpu", dct_scaling="on")


def test_schedule_keyword(shards):
    """schedule= is rf_config.decode_schedule: on the host backend "auto" decodes on the CPU
    (stats say which mode ran), gpu_decode makes it "manual", "balance" is refused by name
    (it needs a CUDA device), and a name outside the four is a ValueError."""
    def stats(**kw):
        with ringfeed.Loader(shards, 8, size=32, device="cpu", decode_threads=1, **kw) as ld:
            next(iter(ld))
            return ld.stats()
    assert stats()["decode_schedule"] == C.RF_SCHEDULE_CPU
    assert stats(schedule="CPU")["decode_schedule"] == C.RF_SCHEDULE_CPU
    st = stats(gpu_decode=True)
    assert st["decode_schedule"] == C.RF_SCHEDULE_MANUAL and st["gpu_decoded"] > 0
    with pytest.raises(ringfeed.RingfeedError, match="BALANCE needs the CUDA backend"):
        stats(schedule="balance")
    with pytest.raises(ringfeed.RingfeedError, match="decode_schedule CPU takes neither"):
        stats(schedule="cpu", gpu_decode=True)
    with pytest.raises(ValueError, match="schedule must be one of"):
        stats(schedule="fast")
