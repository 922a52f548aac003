"""Extra fields (Loader(fields=...)): captions and metadata from shards written by Python's
tarfile, webdataset's TarWriter and GNU tar come back byte for byte, in batch order, the same at
1, 2 and 4 decode threads, b"" for padding; a missing member and one over max_field_bytes are
bad input, raised naming shard, sample or member and offset, or skipped and replaced by samples
that bring their own fields."""
import io
import json
import os
import subprocess
import tarfile

import pytest

import ringfeed
from conftest import shard_jpegs

LIMIT = 512  # max_field_bytes of these tests
N = 11
KW = dict(batch_size=4, size=24, device="cpu", label=None, max_field_bytes=LIMIT)


def caption(i):
    """UTF-8 captions: empty (1), exactly the limit (4), others of different lengths."""
    if i == 1:
        return b""
    if i == 4:
        return ("\u00e9" * (LIMIT // 2)).encode()  # 2 bytes each: exactly LIMIT
    return f"a photo of sample {i}: caf\u00e9, \u732b, \U0001f415 ".encode() * (i % 3 + 1)


def metadata(i):
    return json.dumps({"id": i, "url": f"https://example.com/{i}.jpg", "w": 64}).encode()


@pytest.fixture(scope="module")
def jpegs(shards):
    return shard_jpegs(shards, N)


def samples(jpegs, bad=()):
    """(key, {ext: bytes}) per sample; bad: "missing" drops sample 3's caption, "big" makes
    sample 6's one byte over the limit."""
    out = []
    for i, jpg in enumerate(jpegs):
        m = {"jpg": jpg, "txt": caption(i), "json": metadata(i)}
        if "missing" in bad and i == 3:
            del m["txt"]
        if "big" in bad and i == 6:
            m["txt"] = b"x" * (LIMIT + 1)
        out.append((f"{i:08d}", m))
    return out


def write(writer, path, items):
    if writer == "tarfile":
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
            for key, m in items:
                for ext, data in m.items():
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
    elif writer == "webdataset":
        wds = pytest.importorskip("webdataset")
        with wds.TarWriter(path) as sink:
            for key, m in items:
                sink.write(dict(m, __key__=key))
    else:  # GNU tar from files, in sample order
        src = path + ".d"
        os.makedirs(src)
        names = []
        for key, m in items:
            for ext, data in m.items():
                with open(os.path.join(src, f"{key}.{ext}"), "wb") as f:
                    f.write(data)
                names.append(f"{key}.{ext}")
        subprocess.run(["tar", "--format=gnu", "-cf", path, "-C", src, *names], check=True)
    with tarfile.open(path) as tf:
        return {m.name: m.offset for m in tf}


WRITERS = ["tarfile", "webdataset", "gnutar"]


@pytest.fixture(scope="module", params=WRITERS)
def shard(request, jpegs, tmp_path_factory):
    path = str(tmp_path_factory.mktemp(request.param) / "fields-000000.tar")
    write(request.param, path, samples(jpegs))
    return path


def check(batch, want):
    """Every row's fields are its sample's members; padding rows b""."""
    assert set(batch.fields) == {"txt", "json"}
    for name in ("txt", "json"):
        assert len(batch.fields[name]) == batch.count
        assert all(type(v) is bytes for v in batch.fields[name])
    for i, key in enumerate(batch.keys):
        if batch.is_padding[i]:
            assert batch.fields["txt"][i] == b"" and batch.fields["json"][i] == b""
        else:
            assert batch.fields["txt"][i] == want[key]["txt"]
            assert batch.fields["json"][i] == want[key]["json"]


def epoch(loader, want):
    out = []
    for b in loader:
        check(b, want)
        out.append((list(b.keys), b.fields["txt"], b.fields["json"]))
    return out


def test_fields_round_trip_at_any_thread_count(shard, jpegs):
    want = dict(samples(jpegs))
    runs = []
    for threads in (1, 2, 4):
        with ringfeed.Loader(shard, fields=("txt", "json"), decode_threads=threads, seed=5,
                             **KW) as ld:
            runs.append([epoch(ld, want) for _ in range(2)])
            assert ld.config["fields"] == "txt,json"
            assert ld.config["max_field_bytes"] == LIMIT
    assert runs[0] == runs[1] == runs[2]
    keys = [k for keys, _, _ in runs[0][0] for k in keys]
    assert sorted(keys) == sorted(want)  # exactly once per epoch


def test_fields_outlive_release_and_padding_is_empty(shard, jpegs):
    """The bytes are copies: still right after the batch went back to the ring; a rank padded
    with a repeated sample gets b"" there."""
    want = dict(samples(jpegs))
    kept = []
    pads = 0
    for rank in (0, 1):
        with ringfeed.Loader(shard, fields=["txt", "json"], rank=rank, world_size=2,
                             **KW) as ld:
            for b in ld:
                kept.append((list(b.keys), list(b.is_padding), b.fields))
                pads += int(sum(b.is_padding))
    assert pads == 1  # 11 samples over 2 ranks
    for keys, padding, fields in kept:
        for i, key in enumerate(keys):
            assert fields["txt"][i] == (b"" if padding[i] else want[key]["txt"])


def test_no_fields_gives_an_empty_dict(shard):
    with ringfeed.Loader(shard, **KW) as ld:
        b = next(iter(ld))
        assert b.fields == {}
        assert ld.config["fields"] is None


def raised(writer, path, items):
    """Write the shard, read it asking for txt in dataset order; the error it raises and the
    members' offsets."""
    offsets = write(writer, path, items)
    with pytest.raises(ringfeed.RingfeedError) as ei:
        for _ in ringfeed.Loader(path, fields=("txt",), shuffle=False, **KW):
            pass
    return ei.value, offsets


@pytest.mark.parametrize("writer", WRITERS)
def test_missing_and_oversized_fail_naming_them(writer, jpegs, tmp_path):
    path = str(tmp_path / "bad.tar")
    err, offsets = raised(writer, path, samples(jpegs, bad=("missing",)))
    assert err.code == ringfeed._capi.RF_EFORMAT
    first = min(off for name, off in offsets.items() if name.startswith("00000003."))
    assert (f"{path}: sample 00000003 at offset {first} has no member "
            '00000003.txt (rf_config.fields asks for "txt")') in str(err)

    path = str(tmp_path / "big.tar")
    err, offsets = raised(writer, path, samples(jpegs, bad=("big",)))
    assert err.code == ringfeed._capi.RF_ELIMIT
    assert (f"{path}: member 00000006.txt at offset {offsets['00000006.txt']}: {LIMIT + 1} "
            f"bytes exceed max_field_bytes {LIMIT}") in str(err)
    # the same shard read without the bad field is good
    with ringfeed.Loader(path, fields=("json",), **KW) as ld:
        assert sum(b.count for b in ld) == N


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_skip_mode_replaces_bad_samples_with_their_own_fields(jpegs, tmp_path, threads):
    items = samples(jpegs, bad=("missing", "big"))
    path = str(tmp_path / "bad.tar")
    write("tarfile", path, items)
    want = dict(samples(jpegs))
    with ringfeed.Loader(path, fields=("txt", "json"), on_error="skip", decode_threads=threads,
                         **KW) as ld:
        got = [k for keys, _, _ in epoch(ld, want) for k in keys if k]
        es = ld.epoch_stats()
    assert sorted(got) == sorted(set(want) - {"00000003", "00000006"})
    assert es["skipped_by_reason"]["field"] == 1
    assert es["skipped_by_reason"]["too_large"] == 1


def test_bad_field_lists_are_refused(shard):
    with pytest.raises(TypeError, match="fields: each entry"):
        ringfeed.Loader(shard, fields=(b"txt",), **KW)
    with pytest.raises(ValueError, match="no commas"):
        ringfeed.Loader(shard, fields=("txt,json",), **KW)
    with pytest.raises(ringfeed.RingfeedError, match='"txt" is listed twice'):
        ringfeed.Loader(shard, fields=("txt", "txt"), **KW)
    with pytest.raises(ringfeed.RingfeedError, match="max_field_bytes 67108865 out of range"):
        ringfeed.Loader(shard, fields="txt", **dict(KW, max_field_bytes=(64 << 20) + 1))
