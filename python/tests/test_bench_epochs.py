"""ringfeed-bench --json lists every epoch of a run in per_epoch (a soak runs hundreds), each
with its number, and says how many it left out past the rows it keeps (none here)."""
import json
import os
import subprocess

import pytest

from conftest import find_tool, make_shards

EPOCHS = 70  # more than the 64 rows the report once kept without a word


def test_per_epoch_lists_every_epoch(tmp_path, lib):
    exe = find_tool("tools", "ringfeed-bench", "RINGFEED_BENCH")
    if exe is None:
        pytest.skip("ringfeed-bench not found (build it, or set RINGFEED_BENCH)")
    pattern = make_shards(str(tmp_path), 4, 2, 4, max_side=32)
    p = subprocess.run([exe, "--shards", pattern, "--device", "host", "--size", "16",
                        "--batch", "4", "--threads", "1", "--epochs", str(EPOCHS), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert [e["epoch"] for e in r["per_epoch"]] == list(range(EPOCHS))
    assert r["per_epoch_omitted"] == 0
    assert all(e["open_fds"] > 0 for e in r["per_epoch"])
