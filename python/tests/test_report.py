"""tools/perf_report.py's rendering: docs/performance.md is generated from
docs/performance-results.json, so the two must agree, and the figures it derives (speed-ups,
busy shares) must come from the stored runs."""
import copy
import json
import os
import statistics
import sys

import pytest

pytest.importorskip("matplotlib")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))
import perf_report  # noqa: E402

RESULTS = os.path.join(REPO, "docs", "performance-results.json")


def render(R, tmp_path):
    perf_report.write_report(R, str(tmp_path))
    return (tmp_path / "performance.md").read_text()


def test_committed_report_is_its_results_rendered(tmp_path):
    """A hand edit of docs/performance.md, or a generator change without re-rendering, would
    let the published figures drift from the measured ones."""
    R = json.load(open(RESULTS))
    with open(os.path.join(REPO, "docs", "performance.md")) as f:
        assert render(R, tmp_path) == f.read(), (
            "docs/performance.md differs from tools/perf_report.py's rendering of "
            "docs/performance-results.json: regenerate it (docs/gpu.md)")


def test_scaling_round_ratios_come_from_the_runs(tmp_path):
    R = json.load(open(RESULTS))
    s, sp = R["scaling"], R["scaling_spin"]
    pipe = [hi / lo for hi, lo in zip(s[-1]["runs"], s[0]["runs"])]
    cores = [hi / lo for hi, lo in zip(sp[-1]["runs"], sp[0]["runs"])]
    md = render(R, tmp_path)
    assert (f"{s[-1]['threads']} threads: {s[-1]['img_per_s'] / s[0]['img_per_s']:.1f}x one "
            f"thread, against a target of {0.9 * s[-1]['threads']:.1f}x") in md
    assert (f"the pipeline {', '.join(f'{x:.1f}x' for x in pipe)} (median "
            f"{statistics.median(pipe):.1f}x)") in md
    assert f"the cores alone {', '.join(f'{x:.1f}x' for x in cores)}" in md


def test_breakdown_uses_the_timed_window_when_the_run_has_it(tmp_path):
    R = json.load(open(RESULTS))
    old = render(copy.deepcopy(R), tmp_path)
    assert "| stage | busy s | of wall x threads |" in old  # stored before the timed fields
    rf = R["ringfeed"]
    rf.update(seconds=4.0, io_busy_timed_s=1.0, decode_busy_timed_s=32.0,
              copy_busy_timed_s=0.02, consumer_wait_timed_s=3.0)
    md = render(R, tmp_path)
    assert "| stage | busy s | of the timed window x threads |" in md
    share = 100 * 32.0 / (4.0 * rf["decode_threads"])
    assert f"| decode | 32.00 | {share:.0f}% |" in md
    assert f"| I/O | 1.00 | {100 * 1.0 / (4.0 * rf['io_threads']):.0f}% |" in md


def test_a_stale_note_stands_above_the_figures_until_remeasured(tmp_path):
    R = json.load(open(RESULTS))
    R["stale"] = {"train": "the hardware path changed"}
    md = render(R, tmp_path)
    note = md.index("**Changed since the `train` figures below were measured:** the hardware "
                    "path changed")
    assert note < md.index("## resnet18 training")


def test_hit_ratio_column_is_what_came_from_storage(tmp_path):
    """A run stored before storage accounting has only the share resident at submit (which it
    called cache_hit_ratio, counting readahead in flight as hits): that must not be printed as
    the hit ratio. A run with storage_read_bytes shows both, each in its column."""
    R = json.load(open(RESULTS))
    M = R["memory"]
    assert "storage_read_bytes" not in M["cold_warm"]
    old = render(copy.deepcopy(R), tmp_path)
    assert (f"| cold + --warm | {M['cold_warm']['img_per_s']:,.0f} | — | "
            f"{M['cold_warm']['cache_hit_ratio']:.3f} |") in old
    M["cold_warm"].update(cache_hit_ratio=0.0123, resident_at_submit_ratio=0.93,
                          storage_read_bytes=M["cold_warm"]["bytes_read"])
    c2 = M["cold_2_epochs"]
    c2.update(storage_read_bytes=1)
    c2["per_epoch"][0].update(cache_hit_ratio=0.02, resident_at_submit_ratio=0.5)
    c2["per_epoch"][1].update(cache_hit_ratio=None, resident_at_submit_ratio=1.0)
    md = render(R, tmp_path)
    assert f"| cold + --warm | {M['cold_warm']['img_per_s']:,.0f} | 0.012 | 0.930 |" in md
    ep = c2["per_epoch"]
    assert f"| cold cache, epoch 1 | {ep[0]['img_per_s']:,.0f} | 0.020 | 0.500 |" in md
    assert f"| cold cache, epoch 2 | {ep[1]['img_per_s']:,.0f} | — | 1.000 |" in md  # unmeasured
