"""Labels from KEY.cls members, in shards written by Python's tarfile and webdataset's
TarWriter: "5" and "5\\n" are labels; a missing, empty, negative, non-numeric or overflowing one
is bad input (raised naming shard, sample or member and offset; or skipped and counted under
"label"), unless label=None asks for unlabelled data."""
import io
import os
import tarfile

import pytest

import conftest
import ringfeed
from conftest import labels_once, shard_jpegs

KW = dict(batch_size=2, size=24, device="cpu", decode_threads=2, shuffle=False)
# .cls contents, None for no .cls member; ints go through the writer's own encoding.
LABELS = [3, b"5\n", None, b"", b"-1", b"cat", b" 7 \r\n", b"99999999999", 0, b"2147483647"]
GOOD = {0: 3, 1: 5, 6: 7, 8: 0, 9: 2147483647}
WHY = {2: "sample 00000002 at offset {off} has no label member (00000002.cls); set "
          "label_source RF_LABEL_NONE (Python label=None",
       3: "label member 00000003.cls at offset {off} is empty",
       4: 'label member 00000004.cls at offset {off} holds "-1", a negative number',
       5: 'label member 00000005.cls at offset {off} holds "cat", not a decimal integer',
       7: 'label member 00000007.cls at offset {off} holds "99999999999", a number over '
          "2147483647"}


@pytest.fixture(scope="module")
def jpegs(shards):
    """JPEG bytes of the generated shards, one per sample we write."""
    return shard_jpegs(shards, len(LABELS))


def write_tarfile(path, jpegs):
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        for i, (jpg, lab) in enumerate(zip(jpegs, LABELS)):
            members = [("jpg", jpg)]
            if lab is not None:
                members.append(("cls", str(lab).encode() if isinstance(lab, int) else lab))
            for ext, data in members:
                info = tarfile.TarInfo(f"{i:08d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


def write_webdataset(path, jpegs):
    conftest.write_webdataset(path, jpegs, "cls", LABELS)


@pytest.fixture(scope="module", params=["tarfile", "webdataset"])
def shard(request, jpegs, tmp_path_factory):
    path = os.path.join(str(tmp_path_factory.mktemp(request.param)), "labels-000000.tar")
    (write_tarfile if request.param == "tarfile" else write_webdataset)(path, jpegs)
    with tarfile.open(path) as tf:
        offsets = {m.name: m.offset for m in tf}
    return path, offsets


def test_fail_mode_raises_naming_sample_and_cause(shard):
    """The first bad sample (2: no .cls) raises after batch 0, in the loader's words."""
    path, offsets = shard
    got = []
    with pytest.raises(ringfeed.RingfeedError) as ei:
        for b in ringfeed.Loader(path, **KW):
            got.append((list(b.keys), [int(x) for x in b.labels]))
    assert got == [(["00000000", "00000001"], [3, 5])]
    want = f"{path}: " + WHY[2].format(off=offsets["00000002.jpg"])
    assert want in str(ei.value)
    assert ei.value.code == ringfeed._capi.RF_ELABEL


@pytest.mark.parametrize("bad", sorted(set(WHY) - {2}))
def test_each_bad_label_is_named(shard, bad, tmp_path):
    """Each kind alone (the others made good): the message says which and where."""
    path, offsets = shard
    with tarfile.open(path) as tf:
        members = [(m, tf.extractfile(m).read()) for m in tf]
    one = str(tmp_path / "one.tar")
    with tarfile.open(one, "w", format=tarfile.GNU_FORMAT) as out:
        for m, data in members:
            i = int(m.name[:8])
            if i in WHY and i != bad:
                continue  # only the bad sample under test stays among the bad ones
            out.addfile(m, io.BytesIO(data))
    with tarfile.open(one) as tf:
        off = next(m.offset for m in tf if m.name == f"{bad:08d}.cls")
    with pytest.raises(ringfeed.RingfeedError) as ei:
        for _ in ringfeed.Loader(one, **KW):
            pass
    assert f"{one}: " + WHY[bad].format(off=off) in str(ei.value)


def test_skip_mode_counts_bad_labels(shard):
    path, _ = shard
    ld = ringfeed.Loader(path, on_error="skip", **KW)
    assert labels_once(ld) == {f"{i:08d}": v for i, v in GOOD.items()}
    # stats() counts every epoch's skips, and the pipeline may already be reading the next
    # epoch: at least this epoch's, all of them under "label".
    st = ld.stats()
    assert st["skipped"] >= len(WHY)
    assert st["skipped_by_reason"]["label"] == st["skipped"]
    ld.close()


@pytest.mark.parametrize("threads", [1, 3])
def test_label_none_reads_unlabelled_data(shard, threads):
    """label=None: every sample once, label -1, nothing skipped, at any thread count."""
    path, _ = shard
    ld = ringfeed.Loader(path, label=None, **dict(KW, decode_threads=threads))
    keys, labels = [], []
    for b in ld:
        keys += list(b.keys)
        labels += [int(x) for x in b.labels]
    assert keys == [f"{i:08d}" for i in range(len(LABELS))]
    assert labels == [-1] * len(LABELS)
    assert ld.stats()["skipped"] == 0
    ld.close()


@pytest.mark.parametrize("label", ["CLS", "json", "", 0, False])
def test_bad_label_argument(shard, label):
    with pytest.raises(ValueError, match="label must be 'cls'"):
        ringfeed.Loader(shard[0], label=label, **KW)


def test_num_classes_refuses_labels_not_below_it(shards):
    """num_classes, a setting that is a keyword of its own name: a label not below it is a bad
    label, raised naming the sample and num_classes, or left out and counted under "label";
    a count above every label changes nothing."""
    labels = conftest.shard_labels(shards)
    kw = dict(KW, batch_size=4)
    with ringfeed.Loader(shards, **kw, num_classes=max(labels.values()) + 1) as ld:
        assert ld.config["num_classes"] == max(labels.values()) + 1
        assert labels_once(ld) == labels
    with pytest.raises(ringfeed.RingfeedError, match=r"sample \d+ at offset \d+: label \d is "
                                                     r"not below num_classes 3") as ei:
        for _ in ringfeed.Loader(shards, **kw, num_classes=3):
            pass
    assert ei.value.code == ringfeed._capi.RF_ELABEL
    with ringfeed.Loader(shards, **kw, num_classes=3, on_error="skip") as ld:
        assert labels_once(ld) == {k: v for k, v in labels.items() if v < 3}
        skipped = ld.stats()["epoch_skipped_by_reason"]["label"]
        assert skipped == sum(v >= 3 for v in labels.values()) > 0
    with pytest.raises(ValueError, match=r"^num_classes=0 is out of range 1..2147483647"):
        ringfeed.Loader(shards, **kw, num_classes=0)
