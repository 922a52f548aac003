"""Loader.config: the C loader's effective configuration (rf_loader_config), every automatic
value resolved to what the loader uses and every value passed in reported as given, on shards
written by Python's tarfile."""
import tarfile

import pytest

import ringfeed
from ringfeed import _capi as C
from conftest import rewrite_shards


@pytest.fixture(scope="module")
def tarfile_shards(shards, tmp_path_factory):
    return rewrite_shards(shards, str(tmp_path_factory.mktemp("cfg")), fmt=tarfile.GNU_FORMAT)


def test_config_resolves_every_automatic_value(tarfile_shards):
    with ringfeed.Loader(tarfile_shards, 4, size=16, device="cpu", array_type="numpy") as ld:
        cfg, st = ld.config, ld.stats()
        assert set(cfg) == {name for name, _ in C.RfConfig._fields_} - {"struct_size", "version"}
        assert cfg["decode_threads"] == st["decode_threads"] == ringfeed.default_decode_threads()
        assert cfg["io_threads"] == st["io_threads"] >= 1
        engine = {"io_uring": C.RF_IO_URING, "pread": C.RF_IO_PREAD}[st["io_engine"]]
        assert cfg["io_engine"] == engine
        assert cfg["io_threads"] == (1 if engine == C.RF_IO_URING else 4)
        assert cfg["prefetch_depth"] == ld.prefetch_depth == 4
        assert cfg["device_kind"] == C.RF_DEVICE_HOST
        assert cfg["staging_bytes"] == 64 << 20  # small samples: the formula's floor
        assert cfg["resize_shorter"] == (16 * 256 + 112) // 224
        assert cfg["flip_prob"] == 0.5
        assert cfg["decode_nice"] == 10  # the training loop's threads first
        assert cfg["batch_size"] == 4 and cfg["image_size"] == 16
        assert cfg["shards"] == [tarfile_shards] and cfg["shard_count"] == 1
        assert cfg["resume_state"] is None and cfg["resume_state_bytes"] == 0
        assert cfg["mean"] == [0.0, 0.0, 0.0] and cfg["std"] == [1.0, 1.0, 1.0]
        assert cfg["gpu_decode_percent"] == 100 and cfg["max_sample_bytes"] == 64 << 20
        n = sum(len(b.labels) for b in ld)  # the loader it describes delivers
        assert n == ld.num_samples


def test_config_reports_explicit_values_as_given(tarfile_shards):
    mean, std = (100.0, 110.0, 120.0), (50.0, 60.0, 70.0)
    with ringfeed.Loader(tarfile_shards, 5, size=24, crop="center", layout="NHWC",
                         dtype="float32", mean=mean, std=std, device="cpu",
                         array_type="numpy", seed=9, decode_threads=2, io_threads=3,
                         prefetch_depth=3, io_engine="pread", flip_prob=0.0, scale=(0.5, 0.9),
                         decode_nice=2, timeout=7) as ld:
        cfg = ld.config
        assert (cfg["batch_size"], cfg["image_size"], cfg["crop"]) == (5, 24, C.RF_CROP_CENTER)
        assert cfg["layout"] == C.RF_LAYOUT_NHWC and cfg["dtype"] == C.RF_DTYPE_FLOAT32
        assert cfg["mean"] == list(mean) and cfg["std"] == list(std)
        assert (cfg["seed"], cfg["decode_threads"], cfg["io_threads"]) == (9, 2, 3)
        assert cfg["prefetch_depth"] == 3 and cfg["io_engine"] == C.RF_IO_PREAD
        assert cfg["flip_prob"] == 0.0
        assert cfg["scale_min"] == 0.5 and abs(cfg["scale_max"] - 0.9) < 1e-6
        assert cfg["decode_nice"] == 2 and cfg["next_timeout_ms"] == 7000


def test_config_of_a_closed_loader_raises(tarfile_shards):
    ld = ringfeed.Loader(tarfile_shards, 4, size=16, device="cpu", array_type="numpy")
    ld.close()
    with pytest.raises(RuntimeError, match="closed"):
        ld.config


def test_decode_nice_zero_is_no_added_niceness(tarfile_shards):
    """0 is a value of its own, not the default (10): the decode threads stay at the
    niceness they start with."""
    with ringfeed.Loader(tarfile_shards, 4, size=16, device="cpu", array_type="numpy",
                         decode_nice=0) as ld:
        assert ld.config["decode_nice"] == 0
