"""Labels from a field of each sample's KEY.json member (label="json:PATH"), in shards written by
Python's tarfile, webdataset's TarWriter and GNU tar: nested and dotted paths, whitespace,
unicode and escapes in other keys; every fault is a `label` error naming the member, its offset
and what is wrong (or a counted skip)."""
import io
import json
import os
import shutil
import subprocess
import tarfile

import pytest

import conftest
import ringfeed
from conftest import labels_once, shard_jpegs

KW = dict(batch_size=2, size=24, device="cpu", decode_threads=2, shuffle=False)
PATH = "annotations.class_id"
# .json members as bytes (None: no .json member); GOOD: the label each good one gives.
DOCS = [
    b'{"annotations": {"class_id": 3}}',
    b' \n{ "caption" : "caf\\u00e9 \\ud83d\\ude00 \\"q\\" \xc3\xa9", "annotations" : '
    b'{ "bbox" : [1.5, -2e3, {"x": null}], "class_id" :\t7 }, "class_id": -1 }\r\n',
    None,
    b'{"annotations": {"cl\\u0061ss_id": 0, "x": 1, "x": 2}}',
    b'{"annotations": {"class_id": 2.0}}',
    b'{"annotations": {"class_id": "4"}}',
    b'{"annotations": {"class_id": -4}}',
    b'{"annotations": {"label": 4}}',
    b'{"annotations": {"class_id": 4, "class_id": 5}}',
    b'{"annotations": {"class_id": 4},}',
    b'{"annotations": {"class_id": 2147483647}}',
]
GOOD = {0: 3, 1: 7, 3: 0, 10: 2147483647}
WHY = {2: "sample 00000002 at offset {off} has no label member (00000002.json)",
       4: 'label member 00000004.json at offset {off}: field annotations.class_id (byte 29 of '
          'the member) holds "2.0", a number with a fraction or exponent; a label is an '
          "integer 0..2147483647",
       5: "label member 00000005.json at offset {off}: field annotations.class_id (byte 29 of "
          "the member) is a string",
       6: 'label member 00000006.json at offset {off}: field annotations.class_id (byte 29 of '
          'the member) holds "-4", a negative number',
       7: "label member 00000007.json at offset {off} has no field annotations.class_id",
       8: "label member 00000008.json at offset {off} is not valid JSON: a duplicate key on "
          "the label's path at byte 32 of the member",
       9: "label member 00000009.json at offset {off} is not valid JSON: expected a key (a "
          "string) at byte 32 of the member"}


@pytest.fixture(scope="module")
def jpegs(shards):
    return shard_jpegs(shards, len(DOCS))


def members(jpegs, docs=DOCS):
    for i, (jpg, doc) in enumerate(zip(jpegs, docs)):
        yield f"{i:08d}.jpg", jpg
        if doc is not None:
            yield f"{i:08d}.json", doc


def write_tarfile(path, jpegs):
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members(jpegs):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def write_gnu_tar(path, jpegs):
    if not shutil.which("tar"):
        pytest.skip("no GNU tar")
    src = path + ".d"
    os.makedirs(src)
    names = []
    for name, data in members(jpegs):
        with open(os.path.join(src, name), "wb") as f:
            f.write(data)
        names.append(name)
    subprocess.run(["tar", "--format=gnu", "-cf", path, "-C", src] + names, check=True)


def write_webdataset(path, jpegs):
    conftest.write_webdataset(path, jpegs, "json", DOCS)


WRITERS = {"tarfile": write_tarfile, "gnutar": write_gnu_tar, "webdataset": write_webdataset}


@pytest.fixture(scope="module", params=sorted(WRITERS))
def shard(request, jpegs, tmp_path_factory):
    path = os.path.join(str(tmp_path_factory.mktemp(request.param)), "json-000000.tar")
    WRITERS[request.param](path, jpegs)
    with tarfile.open(path) as tf:
        offsets = {m.name: m.offset for m in tf}
    return path, offsets


def only(shard, keep, tmp_path):
    """The shard's good samples and sample `keep`, rewritten by tarfile; its offsets."""
    path, _ = shard
    out = str(tmp_path / "one.tar")
    with tarfile.open(path) as tf, tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as dst:
        for m in tf:
            i = int(m.name[:8])
            if i in GOOD or i == keep:
                dst.addfile(m, io.BytesIO(tf.extractfile(m).read()))
    with tarfile.open(out) as tf:
        return out, {m.name: m.offset for m in tf}


@pytest.mark.parametrize("bad", sorted(WHY))
def test_each_bad_json_label_is_named(shard, bad, tmp_path):
    one, offsets = only(shard, bad, tmp_path)
    name = f"{bad:08d}.json" if DOCS[bad] is not None else f"{bad:08d}.jpg"
    with pytest.raises(ringfeed.RingfeedError) as ei:
        for _ in ringfeed.Loader(one, label=f"json:{PATH}", **KW):
            pass
    assert ei.value.code == ringfeed._capi.RF_ELABEL
    assert f"{one}: " + WHY[bad].format(off=offsets[name]) in str(ei.value)


@pytest.mark.parametrize("threads", [1, 3])
def test_skip_mode_delivers_good_json_labels_once(shard, threads):
    path, _ = shard
    ld = ringfeed.Loader(path, label=f"json:{PATH}", on_error="skip",
                         **dict(KW, decode_threads=threads))
    assert labels_once(ld) == {f"{i:08d}": v for i, v in GOOD.items()}
    st = ld.stats()
    assert st["skipped"] >= len(WHY)
    assert st["skipped_by_reason"]["label"] == st["skipped"]
    assert ld.config["label_json_path"] == PATH
    ld.close()


def test_webdataset_dict_json_and_top_level_key(jpegs, tmp_path):
    """TarWriter's own encoding of a dict (json.dumps), a top-level key, many epochs."""
    wds = pytest.importorskip("webdataset")
    path = str(tmp_path / "wds-000000.tar")
    with wds.TarWriter(path) as sink:
        for i, jpg in enumerate(jpegs):
            sink.write({"__key__": f"s{i:03d}", "jpg": jpg,
                        "json": {"cls": i % 4, "caption": f"photo n\u00b0{i}", "tags": ["a"]}})
    ld = ringfeed.Loader(path, label="json:cls", **KW)
    for _ in range(2):
        got = {k: int(lab) for b in ld for k, lab in zip(b.keys, b.labels)}
        assert got == {f"s{i:03d}": i % 4 for i in range(len(jpegs))}
    ld.close()


@pytest.mark.parametrize("path, why", [
    ("", "label_json_path must be 1..256 bytes"),
    ("a..b", 'label_json_path "a..b" has an empty key at byte 2'),
    ("x" * 257, "label_json_path must be 1..256 bytes"),
    (".".join("k" * 17), "has more than 16 keys")])
def test_bad_json_path_is_refused_at_create(shard, path, why):
    with pytest.raises(ringfeed.RingfeedError) as ei:
        ringfeed.Loader(shard[0], label=f"json:{path}", **KW)
    assert ei.value.code == ringfeed._capi.RF_EINVAL
    assert why in str(ei.value)


def test_cls_labels_ignore_json_members(shard):
    """label="cls" looks for KEY.cls only: a .json member is not a label then."""
    with pytest.raises(ringfeed.RingfeedError, match=r"has no label member \(00000000\.cls\)"):
        for _ in ringfeed.Loader(shard[0], **KW):
            pass


def test_reference_reader_agrees(shard):
    """Python's json module reads the same labels from the good members (it takes the last of
    duplicate keys, which ringfeed refuses on the label's path)."""
    path, _ = shard
    with tarfile.open(path) as tf:
        ref = {m.name[:8]: json.loads(tf.extractfile(m).read())["annotations"].get("class_id")
               for m in tf if m.name.endswith(".json") and int(m.name[:8]) in GOOD}
    ref["00000003"] = json.loads(DOCS[3])["annotations"]["class_id"]  # key by escape
    assert ref == {f"{i:08d}": v for i, v in GOOD.items()}


@pytest.mark.parametrize("threads", [1, 3])
def test_json_label_member_is_also_a_field(shard, threads):
    """label="json:PATH" with fields=("json",): one walk finds KEY.json as the label and as the
    field, so each delivered sample brings its label and its .json member byte for byte."""
    path, _ = shard
    ld = ringfeed.Loader(path, label=f"json:{PATH}", on_error="skip", fields=("json",),
                         **dict(KW, decode_threads=threads))
    got = {}
    for b in ld:
        for k, lab, doc, pad in zip(b.keys, b.labels, b.fields["json"], b.is_padding):
            if not pad:
                got[k] = (int(lab), doc)
    assert got == {f"{i:08d}": (v, DOCS[i]) for i, v in GOOD.items()}
    st = ld.stats()
    assert st["skipped_by_reason"]["label"] == st["skipped"] >= len(WHY)
    assert ld.config["fields"] == "json" and ld.config["label_json_path"] == PATH
    ld.close()
