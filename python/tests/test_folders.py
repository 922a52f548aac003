"""Image folders from Python: Loader("DIR") (or source="folder") reads an ImageFolder tree
(labels by sorted class-folder index, loader.classes names them) or a `path label` list file,
with the options shards take, every image exactly once per epoch."""
import io
import os
import tarfile

import numpy as np
import pytest

import ringfeed
from conftest import shard_jpegs

KW = dict(batch_size=4, size=32, device="cpu", decode_threads=2, crop="center",
          array_type="numpy")
# Created in this order; labels follow the bytewise-sorted names ("Apple" < "mango" < "zebra").
CLASSES = ["zebra", "Apple", "mango"]
SORTED = sorted(CLASSES)
PER_CLASS = 5


@pytest.fixture(scope="module")
def tree(shards, tmp_path_factory):
    """DIR/<class>/img<i>.jpg from the generated shards' JPEGs; {key: (label, jpeg bytes)}."""
    jpegs = shard_jpegs(shards, len(CLASSES) * PER_CLASS)
    root = tmp_path_factory.mktemp("folder") / "train"
    want = {}
    for c, name in enumerate(CLASSES):
        os.makedirs(root / name)
        for i in range(PER_CLASS):
            data = jpegs[c * PER_CLASS + i]
            (root / name / f"img{i}.jpg").write_bytes(data)
            want[f"{name}/img{i}"] = (SORTED.index(name), data)
    return str(root), want


def epoch(ld):
    out = []
    for b in ld:
        for k, lab, pad, img in zip(b.keys, b.labels, b.is_padding, b.images):
            if not pad:
                out.append((k, int(lab), np.array(img)))
    return out


def test_directory_is_an_image_folder(tree):
    root, want = tree
    ld = ringfeed.Loader(root, **KW)
    assert ld.classes == SORTED
    assert ld.num_samples == len(want)
    for _ in range(2):  # every image exactly once per epoch, labels by sorted class index
        got = epoch(ld)
        assert sorted(k for k, _, _ in got) == sorted(want)
        assert {k: lab for k, lab, _ in got} == {k: v[0] for k, v in want.items()}
    ld.close()


def test_folder_gives_the_pixels_of_the_same_images_in_a_shard(tree, tmp_path):
    """The same options over a folder and over a tar shard of the same files: same pixels."""
    root, want = tree
    shard = str(tmp_path / "same-000000.tar")
    with tarfile.open(shard, "w", format=tarfile.GNU_FORMAT) as tf:
        for k, (lab, data) in sorted(want.items()):
            for ext, payload in (("jpg", data), ("cls", str(lab).encode())):
                info = tarfile.TarInfo(f"{k}.{ext}")
                info.size = len(payload)
                tf.addfile(info, io.BytesIO(payload))
    by_key = {}
    for source, kw in ((root, {}), (shard, {})):
        with ringfeed.Loader(source, shuffle=False, **KW, **kw) as ld:
            by_key[source] = {k: (lab, img) for k, lab, img in epoch(ld)}
    assert by_key[root].keys() == by_key[shard].keys()
    for k, (lab, img) in by_key[root].items():
        assert lab == by_key[shard][k][0]
        assert np.array_equal(img, by_key[shard][k][1]), k


@pytest.mark.parametrize("threads", [1, 3])
def test_list_file_with_source_folder(tree, tmp_path, threads):
    """A `path label` list file (source="folder", as ringfeed-bench --folder): its labels, no
    classes, the same batches at any thread count."""
    root, want = tree
    lst = tmp_path / "train.txt"
    keys = sorted(want)[::2]
    lst.write_text("".join(f"{root}/{k}.jpg {7 * n}\n" for n, k in enumerate(keys)))
    ld = ringfeed.Loader(str(lst), source="folder", seed=5, **dict(KW, decode_threads=threads))
    assert ld.classes == []
    got = epoch(ld)
    assert sorted(lab for _, lab, _ in got) == [7 * n for n in range(len(keys))]
    assert len(got) == len(keys)
    ld.close()
    # a list file is not a directory: without source="folder" it is a shard pattern
    with pytest.raises(ringfeed.RingfeedError):
        ringfeed.Loader(str(lst), **KW)


def test_two_ranks_split_a_folder_exactly(tree):
    root, want = tree
    seen = []
    for rank in range(2):
        with ringfeed.Loader(root, rank=rank, world_size=2, seed=3, **KW) as ld:
            seen += [k for k, _, _ in epoch(ld)]
    assert sorted(seen) == sorted(want)


def test_folder_arguments_refused(tree):
    root, _ = tree
    with pytest.raises(ValueError, match="a folder source takes its labels"):
        ringfeed.Loader(root, label="json:cls", **KW)
    with pytest.raises(ValueError, match="a folder source takes its labels"):
        ringfeed.Loader(root, label=None, **KW)
    with pytest.raises(ValueError, match="a folder source is one path"):
        ringfeed.Loader([root, root], source="folder", **KW)
    with pytest.raises(ValueError, match="source must be one of"):
        ringfeed.Loader(root, source="imagefolder", **KW)
    with pytest.raises(ringfeed.RingfeedError, match="not a regular file|directory"):
        ringfeed.Loader(root, source="tar", **KW)


def test_tar_loader_has_no_classes(shards):
    with ringfeed.Loader(shards, **KW) as ld:
        assert ld.classes is None


def test_folder_of_png_and_webp_files(tmp_path):
    """An ImageFolder tree holding .png, .webp and .jpg files: every file is a sample with its
    class's label, and the same picture as PNG and as lossless WebP gives the same pixels."""
    PIL = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(7)
    root = tmp_path / "mixed"
    os.makedirs(root / "a")
    os.makedirs(root / "b")
    pics = {}
    for i in range(3):
        rgb = rng.integers(0, 256, size=(40 + 3 * i, 56, 3), dtype=np.uint8)
        pics[i] = rgb
        im = PIL.fromarray(rgb)
        im.save(root / "a" / f"p{i}.png")
        im.save(root / "b" / f"p{i}.webp", lossless=True)
    PIL.fromarray(pics[0]).save(root / "b" / "q.JPG", quality=95)
    ld = ringfeed.Loader(str(root), **dict(KW, crop="center"))
    assert ld.classes == ["a", "b"]
    got = {k: (lab, img) for k, lab, img in epoch(ld)}
    ld.close()
    assert sorted(got) == ["a/p0", "a/p1", "a/p2", "b/p0", "b/p1", "b/p2", "b/q"]
    assert all(lab == (0 if k.startswith("a/") else 1) for k, (lab, _) in got.items())
    for i in range(3):  # lossless: identical decodes, identical batches
        assert np.array_equal(got[f"a/p{i}"][1], got[f"b/p{i}"][1])


def test_list_file_labels_are_checked_against_num_classes(tree, tmp_path):
    """A list file's labels are the data's: num_classes refuses one not below it."""
    root, want = tree
    lst = tmp_path / "train.txt"
    keys = sorted(want)[:3]
    lst.write_text("".join(f"{root}/{k}.jpg {7 * n}\n" for n, k in enumerate(keys)))
    with pytest.raises(ringfeed.RingfeedError, match="label 14 is not below num_classes 8"):
        epoch(ringfeed.Loader(str(lst), source="folder", num_classes=8, **KW))
    with ringfeed.Loader(str(lst), source="folder", num_classes=15, **KW) as ld:
        assert sorted(lab for _, lab, _ in epoch(ld)) == [0, 7, 14]
