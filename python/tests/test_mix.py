"""Weighted mixing (docs/python.md, "Mixing sources"): Loader([src_a, src_b], weights=...),
epoch_size=, replacement=, class_weights= and sample_weights=: realised proportions within
binomial bounds, class-balanced draws, exact resume mid-epoch, the same batches at any thread
count, the rank split, and bad input refused naming the argument."""
import json
import math
import os
import subprocess

import numpy as np
import pytest

import ringfeed
from conftest import find_tool, make_shards, rewrite_shards, shard_jpegs

NA, NB = 60, 20  # samples of source a and b


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory, lib):
    d = tmp_path_factory.mktemp("mix")
    a = make_shards(str(d / "a"), NA, 5, 30, seed=1, max_side=32)
    b = make_shards(str(d / "b"), NB, 5, 20, seed=2, max_side=32)
    return a, b


def within_4_sigma(got, n, p):
    sd = math.sqrt(n * p * (1 - p))
    return abs(got - n * p) <= 4 * sd


def mixed(sources, **kw):
    args = dict(size=16, device="cpu", array_type="numpy", seed=3, decode_threads=2,
                weights=[1, 3], epoch_size=400)
    args.update(kw)
    return ringfeed.Loader(list(sources), 16, **args)


def epoch(ld, limit=None):
    ids, pos, pix = [], [], []
    for k, b in enumerate(ld):
        ids += [int(i) for i in b.sample_ids]
        pos += [int(p) for p in b.positions]
        pix += [hash(img.tobytes()) for img in b.images]
        if k + 1 == limit:  # handed out batches count as consumed: stop at the limit
            break
    return ids, pos, pix


def test_proportions_follow_weights(two_sources):
    with mixed(two_sources, epoch_size=2000) as ld:
        assert len(ld) == 125  # epoch_size / batch_size
        ids, _, _ = epoch(ld)
        cfg = ld.config
    assert len(ids) == 2000
    assert cfg["epoch_size"] == 2000 and cfg["weights"] == [1.0, 3.0]
    assert cfg["source_shards"] == [1, 1]
    in_b = sum(i >= NA for i in ids)
    assert in_b == 1500  # exact per epoch: 3/4 of the positions
    # one rank of three sees a random share: within binomial bounds of 3/4
    with mixed(two_sources, epoch_size=2000, rank=1, world_size=3, replacement="on") as ld:
        ids, _, _ = epoch(ld)
    assert within_4_sigma(sum(i >= NA for i in ids), len(ids), 0.75)
    # a concatenation (no weights) would put 1/4 of the samples in b: far outside the bound
    assert not within_4_sigma(round(len(ids) * NB / (NA + NB)), len(ids), 0.75)


def test_without_replacement_each_sample_once_per_round(two_sources):
    with mixed(two_sources, epoch_size=80, weights=[3, 1]) as ld:
        ids, _, _ = epoch(ld)
    assert sorted(i for i in ids if i < NA) == list(range(NA))  # 60 positions: each once
    assert sorted(i for i in ids if i >= NA) == list(range(NA, NA + NB))


def test_exact_resume_mid_epoch(two_sources):
    with mixed(two_sources) as ld:
        full = epoch(ld)
    with mixed(two_sources) as ld:
        head = epoch(ld, limit=9)
        state = ld.state_dict()
    with mixed(two_sources, seed=99) as ld:  # the state's seed wins
        ld.load_state_dict(state)
        tail = epoch(ld)
    n = len(head[0])
    assert n == 9 * 16
    for a, h, t in zip(full, head, tail):
        assert h == a[:n] and t == a[n:]


def test_resume_at_another_world_size_and_other_weights(two_sources):
    with mixed(two_sources) as ld:
        full = epoch(ld)
    with mixed(two_sources) as ld:
        epoch(ld, limit=5)
        state = ld.state_dict()
    rest = {}
    for r in range(2):  # the rest of the epoch re-split over two ranks: the same samples
        with mixed(two_sources, rank=r, world_size=2) as ld:
            ld.load_state_dict(state)
            ids, pos, _ = epoch(ld)
        rest.update(zip(pos, ids))
    assert rest == dict(zip(full[1][80:], full[0][80:]))
    with mixed(two_sources, weights=[1, 1]) as ld:
        with pytest.raises(ringfeed.RingfeedError, match="other sources, weights"):
            ld.load_state_dict(state)


def test_same_batches_at_any_thread_count(two_sources):
    with mixed(two_sources, decode_threads=1, replacement="on") as ld:
        one = epoch(ld)
    with mixed(two_sources, decode_threads=4, replacement=True) as ld:  # True: "on"
        four = epoch(ld)
    assert one == four
    ids = one[0]
    assert len(set(ids)) < len(ids)  # with replacement samples repeat ...
    first = {}
    for i, h in zip(ids, one[2]):
        first.setdefault(i, set()).add(h)
    assert any(len(v) > 1 for v in first.values())  # ... and a repeat gets its own crop


def test_ranks_equal_batches_disjoint_positions(two_sources):
    seen, batches = set(), set()
    for r in range(3):
        with mixed(two_sources, epoch_size=401, rank=r, world_size=3) as ld:
            batches.add(len(ld))
            for b in ld:
                for p, pad in zip(b.positions, b.is_padding):
                    if not pad:
                        assert int(p) not in seen
                        seen.add(int(p))
    assert len(batches) == 1 and seen == set(range(401))


@pytest.mark.parametrize("weights, words", [
    ([1, -1], "weights[1] is -1"), ([float("nan"), 1], "weights[0] is nan"),
    ([0, 0], "weights are all zero"), ([1, 1, 1], "weights has 3 entries for 2 sources"),
])
def test_bad_weights_name_the_setting(two_sources, weights, words):
    with pytest.raises(ringfeed.RingfeedError, match=words.replace("[", r"\[")
                       .replace("]", r"\]")):
        mixed(two_sources, weights=weights)


def test_bad_arguments(two_sources):
    with pytest.raises(TypeError, match="weights"):
        mixed(two_sources, weights="heavy")
    with pytest.raises(ValueError, match="weights is empty"):
        mixed(two_sources, weights=[])
    with pytest.raises(ringfeed.RingfeedError, match="sample_weights has 3 entries"):
        mixed(two_sources, sample_weights=[1, 1, 1])
    with pytest.raises(ringfeed.RingfeedError, match="class_weights need labels known"):
        mixed(two_sources, class_weights=[1, 2])
    with pytest.raises(ringfeed.RingfeedError, match="replacement off"):
        mixed(two_sources, sample_weights=np.ones(NA + NB), replacement="off")
    with pytest.raises(ValueError, match="epoch_size"):
        mixed(two_sources, epoch_size=-1)


def test_sample_weights_only_draw_weighted_samples(two_sources):
    w = np.zeros(NA + NB)
    w[[5, 70]] = 1.0  # one sample of each source
    with mixed(two_sources, sample_weights=w) as ld:
        ids, _, _ = epoch(ld)
        assert ld.config["replacement"] == 2  # AUTO resolved: on
    assert set(ids) == {5, 70} and ids.count(70) == 300


def test_class_weights_balance_a_folder(tmp_path, shards):
    sizes = {0: 30, 1: 6, 2: 2}
    jpegs = iter(shard_jpegs(shards, sum(sizes.values())))
    for c, n in sizes.items():
        os.makedirs(tmp_path / f"c{c}")
        for i in range(n):
            (tmp_path / f"c{c}" / f"{i}.jpg").write_bytes(next(jpegs))
    weights = {c: 1.0 / n for c, n in sizes.items()}
    with ringfeed.Loader(str(tmp_path), 50, size=16, device="cpu", array_type="numpy",
                         class_weights=weights, epoch_size=1200, decode_threads=2) as ld:
        labels = np.concatenate([np.asarray(b.labels) for b in ld])
    assert len(labels) == 1200
    for c in sizes:
        assert within_4_sigma(int((labels == c).sum()), 1200, 1 / 3), np.bincount(labels)


def test_folder_sources_keep_their_own_classes(tmp_path, shards):
    jpegs = iter(shard_jpegs(shards, 12))
    for tree, names in (("a", ("cat", "dog")), ("b", ("x", "y", "z"))):
        for name in names:
            os.makedirs(tmp_path / tree / name)
            for i in range(2):
                (tmp_path / tree / name / f"{i}.jpg").write_bytes(next(jpegs))
    with ringfeed.Loader([str(tmp_path / "a"), str(tmp_path / "b")], 10, size=16,
                         device="cpu", array_type="numpy", weights=[1, 4],
                         epoch_size=100) as ld:
        assert ld.classes == [["cat", "dog"], ["x", "y", "z"]]
        seen = [(int(i), int(lab)) for b in ld for i, lab in zip(b.sample_ids, b.labels)]
    assert sum(i >= 4 for i, _ in seen) == 80  # source b: ids 4.., 4/5 of the positions
    assert {lab for i, lab in seen if i >= 4} == {0, 1, 2}  # b's own class indexes
    assert {lab for i, lab in seen if i < 4} == {0, 1}


def test_token_sources_mix(tmp_path, lib):
    # source a holds tokens below 1000, source b tokens from 1000: a window tells its source
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    np.arange(0, 900, dtype=np.uint16).tofile(a)  # 99 windows of 9 tokens
    np.arange(1000, 1270, dtype=np.uint16).tofile(b)  # 29 windows
    kw = dict(device="cpu", array_type="numpy", weights=[1, 1], epoch_size=200)
    with ringfeed.TokenLoader([str(a), str(b)], 2, 8, 10, **kw) as ld:
        rows = np.concatenate([np.asarray(t.tokens) for t in ld])
        state_len = len(ld.state_dict()["blob"])
    assert rows.shape == (200, 9) and state_len == 72
    from_b = rows[:, 0] >= 1000
    assert int(from_b.sum()) == 100
    assert (rows[from_b] >= 1000).all() and (rows[~from_b] < 1000).all()


def test_bench_flags(two_sources, tmp_path):
    exe = find_tool("tools", "ringfeed-bench", "RINGFEED_BENCH")
    if exe is None:
        pytest.skip("ringfeed-bench not found (build it, or set RINGFEED_BENCH)")
    a, b = two_sources
    base = [exe, "--shards", a, "--shards", b, "--device", "host", "--size", "16",
            "--batch", "10", "--threads", "1", "--json", "--show-config"]

    def bench(*extra):
        return subprocess.run(base + list(extra), capture_output=True, text=True, timeout=300)

    p = bench("--weights", "1,3", "--epoch-size", "300", "--replacement", "on")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["images"] == 300
    assert "epoch_size 300" in p.stdout and "replacement on" in p.stdout
    p = bench("--weights", "1,-1")
    assert p.returncode != 0 and "weights[1] is -1" in p.stderr
    p = bench("--weights", "1,x")
    assert p.returncode != 0 and "--weights" in p.stderr
    w = tmp_path / "w.txt"
    w.write_text(" ".join(["1"] * (NA + NB)))
    p = bench("--sample-weights", str(w), "--epoch-size", "50")
    assert p.returncode == 0, p.stderr
    p = bench("--class-weights", "1,2")
    assert p.returncode != 0 and "class_weights need labels known" in p.stderr
    p = bench("--source-labels", ",none", "--weights", "1,1", "--epoch-size", "40")
    assert p.returncode == 0, p.stderr
    p = bench("--source-labels", "xml,cls")
    assert p.returncode != 0 and 'source_labels[0] is "xml"' in p.stderr
    p = bench("--source-labels", "cls")
    assert p.returncode != 0 and "1 rules for 2 sources" in p.stderr


def test_kept_batch_on_a_mixing_loader(two_sources):
    with mixed(two_sources) as ld:
        b = next(iter(ld)).keep()  # the loader's own _keep, not the mixing arrays
        assert b.count == 16
        b.release()


def test_tar_sources_with_their_own_label_rules(tmp_path, shards):
    jpegs = shard_jpegs(shards, 6)
    wds = pytest.importorskip("webdataset")
    paths = {}
    for name, ext, value in (("cls", "cls", b"3"), ("json", "json", b'{"y": {"z": 8}}'),
                             ("none", "txt", b"caption")):
        paths[name] = str(tmp_path / f"{name}.tar")
        with wds.TarWriter(paths[name]) as sink:
            for i, jpg in enumerate(jpegs[:2]):
                sink.write({"__key__": f"{i:08d}", "jpg": jpg, ext: value})
    sources = [paths["cls"], {"shards": paths["json"], "label": "json:y.z"},
               {"shards": [paths["none"]], "label": None}]
    with ringfeed.Loader(sources, 6, size=16, device="cpu", array_type="numpy",
                         weights=[1, 1, 1]) as ld:
        got = {int(i) // 2: int(lab) for b in ld for i, lab in zip(b.sample_ids, b.labels)}
        assert ld.config["source_labels"] == [None, "json:y.z", "none"]
    assert got == {0: 3, 1: 8, 2: -1}
    with pytest.raises(ValueError, match=r"shards\[1\]\['label'\]"):
        ringfeed.Loader([paths["cls"], {"shards": paths["json"], "label": "xml"}], 6,
                        weights=[1, 1], device="cpu")


def test_skip_counts_every_drawn_position(two_sources, tmp_path):
    # source b's first JPEG is damaged: each position that draws it is one skip
    a, b = two_sources
    first = []

    def damage(name, data):
        if name.endswith(".jpg") and not first:
            first.append(name)
            return data[:20] + b"\x00" * (len(data) - 20)
        return data

    bad = rewrite_shards(b, str(tmp_path / "bad"), damage)
    with mixed((a, bad), on_error="skip", epoch_size=400, replacement="on") as ld:
        delivered = sum(int((~np.asarray(x.is_padding)).sum()) for x in ld)
        st = ld.epoch_stats()
    assert st["final"] and st["delivered"] + st["skipped"] == st["total"] == 400
    assert st["skipped"] > 1 and st["skipped_by_reason"]["corrupt"] == st["skipped"]
    assert delivered == st["delivered"]
