"""Sync-point indexes from Python (docs/sync-index.md): sync_index= reaches the loader, the
first run builds and writes the sidecars, the next reads them, the counts are in stats() and
the pixels are those of a run without them."""
import glob

import numpy as np

import ringfeed
from conftest import epoch_images, make_shards


def run(pattern, mode, epochs=2):
    out = []
    # two batches ahead: the rest are decoded after the first batch is out, when building
    # starts, whatever the timing
    with ringfeed.Loader(pattern, batch_size=8, device="cpu", seed=3, decode_threads=2, size=64,
                         gpu_decode=True, sync_index=mode, prefetch_depth=2) as ld:
        for _ in range(epochs):
            out.append(epoch_images(ld))
        return out, ld.stats()


def same(a, b):
    assert [sorted(e) for e in a] == [sorted(e) for e in b]
    for ea, eb in zip(a, b):
        for k in ea:
            assert np.array_equal(ea[k], eb[k]), k


def test_built_then_read_with_the_same_pixels(tmp_path, lib):
    pattern = make_shards(str(tmp_path / "s"), 48, 4, 24, max_side=160)
    ref, st = run(pattern, "off")
    assert st["sync_indexed"] == st["sync_built"] == 0 and not glob.glob(pattern + ".sync")
    first, st = run(pattern, "build")
    same(first, ref)
    assert st["sync_built"] == 48 and st["sync_loaded"] == 0 and st["sync_stale"] == 0
    assert len(glob.glob(str(tmp_path / "s" / "*.sync"))) == 2
    again, st = run(pattern, "read")
    same(again, ref)
    assert st["sync_loaded"] == 48 and st["sync_built"] == 0
    # decode threads run ahead into the next epoch, so the counts are read as they stand
    assert st["sync_indexed"] >= min(st["gpu_plain_decoded"], 96) > 0 and st["sync_stale"] == 0
