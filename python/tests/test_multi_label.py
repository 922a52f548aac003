"""multi_label (issue 46): a JSON array of class ids at label="json:PATH" in webdataset-style
shards written by Python's tarfile (KEY.jpg + KEY.json) delivered as batch.multi_labels (uint8
N x num_classes multi-hot, or int32 N x max_labels padded with -1) and batch.label_counts, the
first id in batch.labels; a bad id is a `label` error naming the member, or a counted skip;
multihot without num_classes is refused by name."""

import numpy as np
import pytest

import ringfeed
from conftest import shard_jpegs, write_tar

KW = dict(batch_size=3, size=24, device="cpu", decode_threads=2, shuffle=False,
          label="json:labels")
IDS = [[3, 17], [], [5], [9, 0, 9], [1]]
NC = 20


def write(path, jpegs, docs):
    return write_tar(path, [m for i, (jpg, doc) in enumerate(zip(jpegs, docs))
                            for m in ((f"{i:08d}.jpg", jpg), (f"{i:08d}.json", doc))])


@pytest.fixture(scope="module")
def shard(shards, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("mlabel") / "ml-000000.tar")
    docs = [('{"labels": %s}' % ids).encode() for ids in IDS]
    write(path, shard_jpegs(shards, len(IDS)), docs)
    return path


def rows(ld):
    out = {}
    for b in ld:
        for i, key in enumerate(b.keys):
            if not b.is_padding[i]:
                out[key] = (int(b.labels[i]), np.asarray(b.multi_labels[i]).copy(),
                            int(b.label_counts[i]))
    return out


@pytest.mark.parametrize("threads", [1, 3])
def test_multihot(shard, threads):
    ld = ringfeed.Loader(shard, multi_label="multihot", num_classes=NC,
                         **dict(KW, decode_threads=threads))
    got = rows(ld)
    ld.close()
    assert len(got) == len(IDS)
    for i, ids in enumerate(IDS):
        first, hot, count = got[f"{i:08d}"]
        want = np.zeros(NC, np.uint8)
        want[ids] = 1
        assert hot.dtype == np.uint8 and (hot == want).all()
        assert count == len(set(ids)) and first == (ids[0] if ids else -1)


def test_list(shard):
    ld = ringfeed.Loader(shard, multi_label="list", max_labels=4, **KW)
    got = rows(ld)
    ld.close()
    for i, ids in enumerate(IDS):
        first, lst, count = got[f"{i:08d}"]
        assert lst.dtype == np.int32 and list(lst) == ids + [-1] * (4 - len(ids))
        assert count == len(ids) and first == (ids[0] if ids else -1)


def test_off_refuses_arrays(shard, tmp_path):
    with pytest.raises(ringfeed.RingfeedError, match="is an array"):
        for _ in ringfeed.Loader(shard, **KW):
            pass
    path = str(tmp_path / "one-000000.tar")
    write(path, shard_jpegs(shard, 1), [b'{"labels": 4}'])
    ld = ringfeed.Loader(path, **KW)
    b = next(iter(ld))
    assert b.multi_labels is None and b.label_counts is None and int(b.labels[0]) == 4
    ld.close()


def test_bad_ids(shard, tmp_path):
    path = str(tmp_path / "bad-000000.tar")
    docs = [b'{"labels": [1, 2]}', b'{"labels": [3, 25]}', b'{"labels": [1, 2, 3]}']
    offsets = write(path, shard_jpegs(shard, 3), docs)
    with pytest.raises(ringfeed.RingfeedError) as ei:
        for _ in ringfeed.Loader(path, multi_label="multihot", num_classes=NC, **KW):
            pass
    assert ei.value.code == ringfeed._capi.RF_ELABEL
    want = f"label member 00000001.json at offset {offsets['00000001.json']}"
    assert want in str(ei.value) and "id 25 is not below num_classes 20" in str(ei.value)
    ld = ringfeed.Loader(path, multi_label="list", max_labels=2, on_error="skip",
                         **dict(KW, num_classes=NC))
    assert len(rows(ld)) == 1  # 25 is over num_classes, three ids over max_labels
    st = ld.stats()
    assert st["skipped_by_reason"]["label"] == st["skipped"] >= 2
    ld.close()
    with pytest.raises(ringfeed.RingfeedError, match="multi_label multihot.*num_classes"):
        ringfeed.Loader(path, multi_label="multihot", **KW)
