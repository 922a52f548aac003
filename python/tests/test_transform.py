"""Loader(transform=fn, transform_threads=N): fn over each decoded HWC uint8 image on the decode
threads before the batch is handed out. Its pixels land in the batch (either layout, before
the float conversion); batches, order and exactly-once are the same at 1 and 4 threads;
a resumed loader gives the same following batches; an exception is raised naming the key
(on_error="fail") or skipped, counted under "hook" and replaced (on_error="skip"); key=,
fields= and seed= are passed when fn declares them."""
import importlib.util
import io
import json
import os
import tarfile
import threading
import time
from contextlib import redirect_stdout

import numpy as np
import pytest

import ringfeed
from conftest import N_IMAGES, REPO, shard_jpegs

KW = dict(size=24, device="cpu", array_type="numpy", layout="NHWC", seed=5, copy=True)


def invert(img):
    return 255 - img


def keyed(img, key):
    """A transform whose output depends on the sample: the key's number XORed into every
    pixel, so a wrong row or a doubled call shows."""
    return img ^ np.uint8(int(key[-4:]) % 251 + 1)


def epoch(ld):
    """One epoch as (keys, labels, images) per batch; a padding sample's key is None."""
    return [([None if p else k for k, p in zip(b.keys, b.is_padding)], np.array(b.labels),
             np.array(b.images)) for b in ld]


def flat_keys(batches):
    return [k for keys, _, _ in batches for k in keys]


def test_transform_replaces_the_pixels(shards):
    """Each image is fn's output: inverted pixels in NHWC and NCHW, and under a float dtype the
    conversion normalizes fn's pixels (fn runs before it)."""
    for layout in ("NHWC", "NCHW"):
        kw = dict(KW, layout=layout)
        with ringfeed.Loader(shards, 8, **kw) as ld:
            plain = epoch(ld)
        with ringfeed.Loader(shards, 8, transform=invert, **kw) as ld:
            got = epoch(ld)
        assert len(got) == len(plain) > 1
        for (k, y, x), (pk, py, px) in zip(got, plain):
            assert k == pk and (y == py).all()
            assert (x == 255 - px).all(), layout
    mean, std = (10.0, 20.0, 30.0), (50.0, 60.0, 70.0)
    with ringfeed.Loader(shards, 8, **KW) as ld:
        plain = epoch(ld)
    with ringfeed.Loader(shards, 8, transform=invert, **dict(KW, dtype="float32", mean=mean,
                                                             std=std)) as ld:
        got = epoch(ld)
    for (_, _, x), (_, _, px) in zip(got, plain):
        want = ((255 - px).astype(np.float32) - np.float32(mean)) / np.float32(std)
        np.testing.assert_allclose(x, want, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 4])
def test_order_and_exactly_once_at_any_thread_count(shards, threads):
    """Two epochs at `threads` transform threads: the same keys, labels and pixels in the same
    order as at one thread and as the plain loader's (transformed: keyed() applied once to
    each image), every sample once an epoch."""
    runs = {}
    for n in (1, threads):
        with ringfeed.Loader(shards, 8, transform=keyed, transform_threads=n, **KW) as ld:
            assert ld.stats()["decode_threads"] == max(n, ringfeed.default_decode_threads())
            runs[n] = [epoch(ld) for _ in range(2)]
    with ringfeed.Loader(shards, 8, **KW) as ld:
        plain = [epoch(ld) for _ in range(2)]
    for e in range(2):
        keys = flat_keys(runs[threads][e])
        assert len(keys) == len(set(keys)) == N_IMAGES
        for (k, y, x), (k1, y1, x1), (pk, py, px) in zip(runs[threads][e], runs[1][e], plain[e]):
            assert k == k1 == pk and (y == y1).all() and (y == py).all()
            assert (x == x1).all()
            want = np.stack([keyed(p, key) for p, key in zip(px, pk)])
            assert (x == want).all()


def test_resume_mid_epoch_gives_the_same_batches(shards):
    """state_dict() after 2 batches, loaded into a new loader with the same transform: the
    batches that follow are the ones the first loader went on with, transformed alike."""
    with ringfeed.Loader(shards, 8, transform=keyed, transform_threads=2, **KW) as ld:
        it = iter(ld)
        for _ in range(2):
            next(it)
        state = ld.state_dict()
        rest = [(list(b.keys), np.array(b.images)) for b in it]
    with ringfeed.Loader(shards, 8, transform=keyed, transform_threads=3, **KW) as ld:
        ld.load_state_dict(state)
        again = [(list(b.keys), np.array(b.images)) for b in ld]
    assert len(rest) == len(again) > 1
    for (k, x), (k2, x2) in zip(rest, again):
        assert k == k2 and (x == x2).all()


def bad_for(key_bad):
    def fn(img, key):
        if key == key_bad:
            raise ValueError(f"cannot augment {key}")
        return img
    return fn


def all_keys(shards):
    with ringfeed.Loader(shards, 8, **KW) as ld:
        return flat_keys(epoch(ld))


def test_exception_fails_naming_the_key(shards):
    """on_error="fail": next() raises TransformError (a RingfeedError) naming the key and the
    exception, which is its __cause__, and with the library's shard and member; again on
    every later call."""
    victim = all_keys(shards)[13]
    with ringfeed.Loader(shards, 8, transform=bad_for(victim), **KW) as ld:
        it = iter(ld)
        with pytest.raises(ringfeed.TransformError) as ei:
            for _ in it:
                pass
        e = ei.value
        assert isinstance(e, ringfeed.RingfeedError) and e.name == "RF_EHOOK"
        assert victim in str(e) and f"ValueError: cannot augment {victim}" in str(e)
        assert e.key == victim and isinstance(e.__cause__, ValueError)
        assert ".tar" in str(e)
        with pytest.raises(ringfeed.TransformError, match=victim):
            next(iter(ld))


def test_wrong_array_fails_naming_the_key(shards):
    """A result of another shape or dtype is a failure of fn, named like an exception."""
    for bad in (lambda img: img[:-1], lambda img: img.astype(np.float32)):
        with ringfeed.Loader(shards, 8, transform=bad, **KW) as ld:
            with pytest.raises(ringfeed.TransformError, match=r"transform raised on sample "
                               r"\w+: ValueError: transform returned"):
                epoch(ld)


def test_exception_skips_counted_and_replaced(shards, caplog):
    """on_error="skip": the sample is left out and counted under "hook", batches keep their
    sizes (its place is filled by another sample, the epoch's end by blank padding), every
    other sample comes once; the message names the key (log and transform_errors)."""
    with ringfeed.Loader(shards, 8, **KW) as ld:
        plain = epoch(ld)
    keys = flat_keys(plain)
    victim = keys[13]
    with caplog.at_level("WARNING", logger="ringfeed"):
        with ringfeed.Loader(shards, 8, on_error="skip", transform=bad_for(victim),
                             transform_threads=2, **KW) as ld:
            got = epoch(ld)
            st = ld.epoch_stats()
            errors = ld.transform_errors
    delivered = [k for k in flat_keys(got) if k is not None]
    assert victim not in delivered
    assert sorted(delivered) == sorted(k for k in keys if k != victim)
    assert [len(k) for k, _, _ in got] == [len(k) for k, _, _ in plain]
    assert st["skipped_by_reason"]["hook"] == 1 == st["skipped"]
    assert st["delivered"] + st["skipped"] == st["total"] == N_IMAGES
    # (the next epoch's batches are prefetched: its turn of the victim may be in too)
    assert errors and all(victim in e and "ValueError" in e for e in errors)
    assert any(victim in r.getMessage() for r in caplog.records)


def fields_shard(tmp_path, shards, n=12):
    """A tarfile shard of n samples: KEY.jpg, KEY.cls and a caption KEY.txt naming the key."""
    path = tmp_path / "f-000000.tar"
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        for i, jpg in enumerate(shard_jpegs(shards, n)):
            key = f"{i:06d}"
            for ext, data in (("jpg", jpg), ("cls", b"1"), ("txt", f"caption {key}".encode())):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return str(path)


def test_keywords_passed_when_declared(tmp_path, shards):
    """key=, fields= and seed= come only to a fn that declares them (or **kwargs): fields as
    {extension: bytes} of the loader's fields, the same bytes the batch delivers; seed an
    integer of its own for each sample."""
    shard = fields_shard(tmp_path, shards)
    seen = {"plain": [], "key": [], "fields": [], "both": [], "seed": []}
    lock = threading.Lock()

    def rec(name, kw):
        with lock:
            seen[name].append(kw)

    fns = {
        "plain": lambda img: (rec("plain", {}), img)[1],
        "key": lambda img, key: (rec("key", {"key": key}), img)[1],
        "fields": lambda img, *, fields: (rec("fields", {"fields": fields}), img)[1],
        "both": lambda img, **kw: (rec("both", kw), img)[1],
        "seed": lambda img, seed: (rec("seed", {"seed": seed}), img)[1],
    }
    for name, fn in fns.items():
        with ringfeed.Loader(shard, 4, fields=("txt",), transform=fn, **KW) as ld:
            batches = [(list(b.keys), b.fields["txt"]) for b in ld]
        captions = {k: t for keys, txt in batches for k, t in zip(keys, txt)}
        assert len(captions) == 12
        assert len(seen[name]) >= 12  # and the next epoch's prefetched samples
        for kw in seen[name]:
            if name == "plain":
                assert kw == {}
            if name in ("key", "both"):
                assert kw["key"] in captions
            if name in ("fields", "both"):
                assert set(kw["fields"]) == {"txt"}
                assert kw["fields"]["txt"].decode().startswith("caption ")
            if name == "both":
                assert kw["fields"]["txt"] == captions[kw["key"]] == \
                    f"caption {kw['key']}".encode()
                assert set(kw) == {"key", "fields", "seed"}
            if name in ("seed", "both"):
                assert isinstance(kw["seed"], int) and 0 <= kw["seed"] < 2**64
    assert len({kw["seed"] for kw in seen["seed"]}) == len(seen["seed"])
    # a loader without fields passes an empty dict
    seen["fields"].clear()
    with ringfeed.Loader(shard, 4, transform=fns["fields"], **KW) as ld:
        epoch(ld)
    assert seen["fields"] and all(kw["fields"] == {} for kw in seen["fields"])


def noise(img, seed):
    """A random transform drawing from the per-sample seed."""
    return img ^ np.random.default_rng(seed).integers(0, 256, img.shape, dtype=np.uint8)


def test_seed_makes_random_transforms_reproducible(shards):
    """seed= is the library's per-sample seed: a transform drawing from it gives the same
    batches at 1 and 4 threads and after a resume, other draws in the next epoch."""
    runs = []
    for n in (1, 4):
        with ringfeed.Loader(shards, 8, transform=noise, transform_threads=n, **KW) as ld:
            runs.append([epoch(ld) for _ in range(2)])
    for (k, _, x), (k4, _, x4) in zip(runs[0][0] + runs[0][1], runs[1][0] + runs[1][1]):
        assert k == k4 and (x == x4).all()
    seen = []  # the crop and flip drawn alike every epoch: only the noise differs
    with ringfeed.Loader(shards, 8, transform=noise, **dict(KW, crop="center",
                                                           flip_prob=0.0)) as ld:
        for _ in range(2):
            seen.append({k: xi for keys, _, x in epoch(ld) for k, xi in zip(keys, x)})
    key = next(iter(seen[0]))
    assert not (seen[0][key] == seen[1][key]).all(), "the same draw in two epochs"
    with ringfeed.Loader(shards, 8, transform=noise, transform_threads=2, **KW) as ld:
        it = iter(ld)
        next(it)
        state = ld.state_dict()
        rest = [np.array(b.images) for b in it]
    with ringfeed.Loader(shards, 8, transform=noise, **KW) as ld:
        ld.load_state_dict(state)
        assert all((a == b).all() for a, b in zip(rest, [np.array(b.images) for b in ld]))


def test_transform_threads_caps_the_calls_at_once(shards):
    """decode_threads=4, transform_threads=2: at most 2 calls of fn at once (fn sleeps,
    releasing the GIL, so more would overlap)."""
    state = {"now": 0, "most": 0}
    lock = threading.Lock()

    def slow(img):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.002)
        with lock:
            state["now"] -= 1
        return img

    with ringfeed.Loader(shards, 8, transform=slow, transform_threads=2, decode_threads=4,
                         **KW) as ld:
        assert ld.stats()["decode_threads"] == 4
        epoch(ld)
    assert state["most"] == 2


def test_arguments_are_checked(shards):
    with pytest.raises(ValueError, match="decode_threads >= 4"):
        ringfeed.Loader(shards, 8, transform=invert, transform_threads=4, decode_threads=2,
                        **KW)
    with pytest.raises(ValueError, match="needs a transform"):
        ringfeed.Loader(shards, 8, transform_threads=2, **KW)
    with pytest.raises(TypeError, match="callable"):
        ringfeed.Loader(shards, 8, transform="invert", **KW)
    with pytest.raises(TypeError, match="one positional argument"):
        ringfeed.Loader(shards, 8, transform=lambda: None, **KW)
    with ringfeed.Loader(shards, 8, **KW) as ld:
        assert ld.transform_errors == []


def test_bench_script_prints_one_line_per_run(shards):
    """python/examples/transform_bench.py: the loader alone, the per-batch jitter and one run
    per thread count, each with its rate, CPU cost and thread counts."""
    path = os.path.join(REPO, "python", "examples", "transform_bench.py")
    spec = importlib.util.spec_from_file_location("transform_bench_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = io.StringIO()
    with redirect_stdout(out):
        mod.main(["--shards", shards, "--batch", "8", "--size", "32", "--images", "24",
                  "--warmup", "1", "--threads", "1,3"])
    recs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["transform"], r["transform_threads"]) for r in recs] == [
        ("none", None), ("jitter per batch", None), ("jitter", 1), ("jitter", 3)]
    assert recs[3]["decode_threads"] == max(3, ringfeed.default_decode_threads())
    for r in recs:
        assert r["img_per_s"] > 0 and r["cpu_ms_per_img"] >= 0 and r["images"] >= 24


@pytest.mark.parametrize("wait", [False, True])
def test_close_from_the_transform_does_not_hang(shards, wait):
    """fn closing its own loader (or a GC run inside fn dropping it): the C loader's stop
    waits for its decode threads, one of which runs fn, so the binding stops it from another
    thread. With the consumer waiting in next() or idle, the loader ends and nothing hangs."""
    holder = {}
    victim = all_keys(shards)[20]

    def fn(img, key):
        if key == victim:
            holder["ld"].close()
        return img

    ld = ringfeed.Loader(shards, 8, transform=fn, **KW)
    holder["ld"] = ld
    handle = ld._h
    done = threading.Event()

    def consume():
        try:
            if wait:
                for _ in ld:
                    pass
            else:
                time.sleep(0.5)  # the prefetch reaches the victim while nobody calls next()
        except RuntimeError:
            pass
        done.set()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    assert done.wait(60), "hung"
    deadline = time.monotonic() + 30
    while not handle.quiet() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ld._closed and handle.quiet(), "the C loader's threads were not stopped"
