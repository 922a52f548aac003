"""The installed binary wheel, as tests/wheel_test.sh runs it: ringfeed imported from a fresh
venv with no RINGFEED_LIB or PYTHONPATH, the system's liburing, libjpeg, libspng and libwebp
hidden, so every library it loads must come from the wheel. Skipped in a checkout's run (the
script sets RINGFEED_WHEEL_SHARDS to shards it generated before hiding the libraries)."""
import os
import sysconfig

import pytest

import ringfeed
from conftest import REPO, labels_once, rewrite_shards, shard_labels

SHARDS = os.environ.get("RINGFEED_WHEEL_SHARDS")
pytestmark = pytest.mark.skipif(not SHARDS, reason="run by tests/wheel_test.sh on the wheel")

BUNDLED = ("liburing", "libjpeg", "libspng", "libwebp")


def test_the_library_and_its_dependencies_come_from_the_wheel():
    assert "RINGFEED_LIB" not in os.environ and "PYTHONPATH" not in os.environ
    site = sysconfig.get_paths()["platlib"]
    assert ringfeed.library_path() == os.path.join(site, "ringfeed", "libringfeed.so.0")
    with open("/proc/self/maps") as f:
        mapped = {line.split()[-1] for line in f if "/lib" in line}
    for name in BUNDLED:
        paths = {p for p in mapped if os.path.basename(p).startswith(name + "-")
                 or os.path.basename(p).startswith(name + ".")}
        assert paths, f"{name} is not loaded"
        assert all(p.startswith(os.path.join(site, "ringfeed.libs") + os.sep)
                   for p in paths), paths


def test_the_metadata_carries_the_version_and_the_licence():
    from importlib import metadata
    md = metadata.metadata("ringfeed")
    assert md["Version"] == ringfeed.__version__ == ringfeed.version()
    assert md["License-Expression"] == "Apache-2.0" and md["License-File"] == "LICENSE"
    installed = [f for f in metadata.files("ringfeed") if f.name == "LICENSE"]
    assert len(installed) == 1
    with open(os.path.join(REPO, "LICENSE")) as f:
        assert installed[0].read_text() == f.read()
    debian = "/usr/share/common-licenses/Apache-2.0"
    if os.path.exists(debian):
        with open(debian) as f:
            assert installed[0].read_text() == f.read()


@pytest.mark.parametrize("writer", ["ringfeed-gen", "tarfile"])
def test_one_epoch_delivers_every_sample_once_with_its_label(tmp_path, writer):
    pattern = SHARDS if writer == "ringfeed-gen" else rewrite_shards(SHARDS, str(tmp_path))
    want = shard_labels(pattern)
    assert len(want) >= 32
    with ringfeed.Loader(pattern, 8, size=32, device="cpu", decode_threads=2,
                         array_type="numpy") as ld:
        assert labels_once(ld) == want
