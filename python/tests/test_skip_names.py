"""Skip reasons by name: the library names them (rf_skip_reason_name), stats() and epoch_stats()
key their counts by those names, a position still reads its count as the list they were did,
and ringfeed-bench --json keys its counts by the same names."""
import json
import subprocess

import pytest

import ringfeed
from conftest import find_tool, make_shards
from ringfeed import _capi as C
from test_errors import corrupt_one_jpeg

KW = dict(batch_size=8, size=24, device="cpu", decode_threads=2, array_type="numpy")
# Spelled out, not read from the library: they are keys users and dashboards count on.
NAMES = ("tar_header", "truncated", "not_jpeg", "corrupt", "too_large", "io", "label", "hook",
         "field", "mask")


@pytest.fixture(scope="module")
def one_bad(tmp_path_factory):
    """40 samples in 2 shards, the first JPEG of shard 0 made a GIF: one not_jpeg skip."""
    pattern = make_shards(str(tmp_path_factory.mktemp("skipnames")), 40, 5, 20)
    return pattern, corrupt_one_jpeg(pattern)


def test_the_names_are_the_librarys():
    assert ringfeed.SKIP_REASONS == NAMES
    assert ringfeed.loader.SKIP_REASONS is ringfeed.SKIP_REASONS
    assert C.lib().rf_skip_reason_name(len(NAMES)) is None
    assert C.lib().rf_skip_reason_name(2**32 - 1) is None


def test_counts_by_name(one_bad):
    pattern, key = one_bad
    with ringfeed.Loader(pattern, on_error="skip", seed=1, **KW) as ld:
        keys = [k for b in ld for k, p in zip(b.keys, b.is_padding) if not p]
        es, st = ld.epoch_stats(), ld.stats()
    assert key not in keys and len(keys) == 39
    for counts in (es["skipped_by_reason"], st["epoch_skipped_by_reason"]):
        assert isinstance(counts, dict)
        assert tuple(counts) == NAMES  # every reason, in the enum's order, zeros included
        assert counts == dict.fromkeys(NAMES, 0) | {"not_jpeg": 1}
    # stats() counts the next epoch's prefetched batches too: the same sample, once more
    assert tuple(st["skipped_by_reason"]) == NAMES
    assert st["skipped_by_reason"]["not_jpeg"] == st["skipped"] >= 1
    assert sum(es["skipped_by_reason"].values()) == es["skipped"] == 1
    assert json.loads(json.dumps(es))["skipped_by_reason"]["not_jpeg"] == 1


def test_a_position_still_reads_its_count(one_bad):
    """Code written when skipped_by_reason was a list of RF_SKIP_REASONS integers indexed like
    SKIP_REASONS keeps working; anything else is a KeyError."""
    pattern, _ = one_bad
    with ringfeed.Loader(pattern, on_error="skip", seed=1, **KW) as ld:
        for _ in ld:
            pass
        counts = ld.epoch_stats()["skipped_by_reason"]
    slots = len(C.RfStats().skipped_by_reason)
    assert counts[ringfeed.SKIP_REASONS.index("not_jpeg")] == counts["not_jpeg"] == 1
    assert [counts[i] for i in range(slots)] == [0, 0, 1] + [0] * (slots - 3)
    for bad in (slots, -1, True, "nope", 2.0):
        with pytest.raises(KeyError):
            counts[bad]
    assert 2 not in counts and "not_jpeg" in counts  # membership is by name, as a dict's


def test_bench_json_names_the_reasons(one_bad):
    exe = find_tool("tools", "ringfeed-bench", "RINGFEED_BENCH")
    if exe is None:
        pytest.skip("ringfeed-bench not found (build it, or set RINGFEED_BENCH)")
    pattern, _ = one_bad
    p = subprocess.run([exe, "--shards", pattern, "--device", "host", "--size", "24",
                        "--batch", "8", "--threads", "2", "--on-error", "skip", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert list(r["skipped_by_reason"]) == list(ringfeed.SKIP_REASONS)
    assert r["skipped_by_reason"]["not_jpeg"] == 1 and r["skipped"] == 1
