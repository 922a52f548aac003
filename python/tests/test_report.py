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


def photo_runs():
    """Two runs of every photos row, each tool reporting what it reports (ringfeed: where its
    samples were decoded), figures that differ from row to row and round to round."""
    runs = {}
    for i, (key, _, tool, _) in enumerate(perf_report.PHOTO_ROWS):
        for j in range(2):
            r = {"img_per_s": 1000.0 * (i + 2) + 300 * j}
            if tool.startswith("ringfeed"):
                n = 30720
                # the defaults are BALANCE on the CUDA device
                hw = {"ringfeed_manual30": 10000 + j, "ringfeed": 4000}.get(key, 0)
                gpu = {"ringfeed_manual30": 15000, "ringfeed": 9000 + 7 * j}.get(key, 0)
                r.update(first_batch_s=0.02 + j / 100, samples_decoded=n, hw_decoded=hw,
                         gpu_decoded=gpu, decode_schedule={"ringfeed_cpu": 1,
                                                           "ringfeed_manual30": 2}.get(key, 3),
                         sched_gpu_permille=600 + j, sched_hw_permille=350, hw_engines=2,
                         hw_open_ms=900.0, decode_threads=16, first_batch_ms=20.0 + j)
            else:
                r["first_batch_s"] = 1.5 + j
            runs.setdefault(key, []).append(perf_report.photo_run(tool, r))
    return runs


def photos_results(runs, unavailable=None):
    sizes = {"images": 10240, "shards": 80, "bytes": 10240 * 35000, "mean_bytes": 35000.0,
             "min_bytes": 1900, "max_bytes": 166400, "mean_kpx": 232.4, "width": [200, 900],
             "height": [201, 899], "sampling": {"4:2:0": 10240}, "progressive": 0,
             "sources": "/usr/share/backgrounds/mate/nature/*.jpg", "source_files": 12}
    return {"set": sizes, "cpus": 16, "device": "cuda", "rounds": 2,
            "rows": perf_report.photo_rows(runs), "unavailable": unavailable or {}}


def test_photos_ratios_and_where_decoded_come_from_the_runs(tmp_path):
    R = json.load(open(RESULTS))
    runs = photo_runs()
    R["photos"] = photos_results(runs)
    md = render(R, tmp_path)
    med = {k: statistics.median(r["img_per_s"] for r in v) for k, v in runs.items()}
    best = max(v for k, v in med.items() if k.startswith("dali"))
    for key, label, tool, _ in perf_report.PHOTO_ROWS:
        rr = [r["img_per_s"] for r in runs[key]]
        fb = statistics.median(r["first_batch_ms"] for r in runs[key])
        assert (f"| {label} | {med[key]:,.0f} | {med[key] / best:.2f}x | "
                f"{med[key] / med['ringfeed']:.2f}x | {fb:,.0f} ms | "
                f"{min(rr):,.0f}-{max(rr):,.0f} |") in md
    man = runs["ringfeed_manual30"]
    hw, gpu = sum(r["hw_decoded"] for r in man), sum(r["gpu_decoded"] for r in man)
    n = sum(r["samples_decoded"] for r in man)
    assert (f"hardware decoders {100 * hw / n:.0f}%, GPU kernels {100 * gpu / n:.0f}%, CPU "
            f"{100 * (n - hw - gpu) / n:.0f}%; schedule manual |") in md
    assert "CPU 100%; schedule cpu |" in md
    assert ("schedule balance, shares at the end GPU 60.0% (engines 35.0% of it), 60.1% "
            "(engines 35.0% of it) |") in md
    assert "mean 35.0 KB (1.9-166.4 KB), mean 232 kpx, widths 200-900 px" in md
    assert "into GPU memory, batch 256, 16 decode threads" in md
    assert "not measured" not in md
    assert md.index("## The same images with restart") < md.index("## Plain JPEG photographs") \
        < md.index("## Decode-thread scaling")
    assert (tmp_path / "photos.png").stat().st_size > 0


def test_photos_section_adds_only_itself(tmp_path):
    """A --merge run of the photos section re-renders every other section as it was."""
    R = json.load(open(RESULTS))
    R.pop("photos", None)  # the stored figures' own section, if measured, is replaced below
    before = render(copy.deepcopy(R), tmp_path).split("\n")
    R["photos"] = photos_results(photo_runs())
    after = render(R, tmp_path).split("\n")
    start = after.index("## Plain JPEG photographs")
    end = after.index("![throughput per loader, photographs](photos.png)") + 2
    assert after[:start] + after[end:] == before


def test_photo_tools_not_there_are_notes_not_figures(tmp_path):
    R = json.load(open(RESULTS))
    runs = {"ringfeed": photo_runs()["ringfeed"]}
    why = {"dali": "it could not be imported (ModuleNotFoundError: No module named 'nvidia')",
           "ringfeed_gpu": "`--device host` decodes on the CPU only"}
    R["photos"] = photos_results(runs, why)
    md = render(R, tmp_path)
    assert (f"**DALI rows not measured:** {why['dali']}; no figure stands in for them.") in md
    assert (f"**ringfeed's GPU-schedule rows not measured:** {why['ringfeed_gpu']}; no figure "
            "stands in for them.") in md
    assert "**PyTorch DataLoader rows not measured" not in md
    med = statistics.median(r["img_per_s"] for r in runs["ringfeed"])
    assert f"| ringfeed defaults | {med:,.0f} | - | 1.00x |" in md
    section = md[md.index("## Plain JPEG photographs"):md.index("## Decode-thread scaling")]
    assert "| DALI" not in section and "| PyTorch" not in section


def train_runs(rounds, gb, rows, steps=None):
    """rows: key -> (fraction of each round's GPU-bound run, GPU waited, decode summary);
    steps: key -> each round's per-step parts (the example's "step"), for the rows that have
    them."""
    runs = {"synthetic": [{"img_per_s": g, "gpu_wait_fraction": 0.0} for g in gb]}
    for key, (frac, wait, dec) in rows.items():
        runs[key] = [dict(dec, img_per_s=g * f, gpu_wait_fraction=w)
                     for g, f, w in zip(gb, frac, wait)]
    for key, parts in (steps or {}).items():
        for r, p in zip(runs[key], parts):
            r["step"] = p
    return {"steps": 400, "rounds": rounds, "runs": runs}


def step_parts(span, p90, launch, cpu, next_ms=0.3):
    return {"next_ms": next_ms, "launch_ms": launch, "gpu_span_ms": span, "gpu_span_p90_ms": p90,
            "process_cpu_ms": cpu}


def test_photo_training_rows_come_from_their_rounds(tmp_path):
    """Each training row's median over its rounds, its ratio to the GPU-bound median, each
    round's ratio to its own GPU-bound run, the median wait, the decode threads and where the
    samples went, for every model measured; a model not measured has no table."""
    R = json.load(open(RESULTS))
    R["photos"] = photos_results(photo_runs())
    bal = {"decode_schedule": 3, "decode_threads": 15, "samples_decoded": 100000,
           "gpu_decoded": 1000, "hw_decoded": 0, "sched_gpu_permille": 0,
           "sched_hw_permille": 0}
    cpu = dict(bal, decode_schedule=1, gpu_decoded=0)
    gb = [13000.0, 12900.0, 13100.0]
    R["photos"]["train"] = {"resnet18": train_runs(3, gb, {
        "ringfeed": ([0.99, 0.97, 0.985], [0.01, 0.03, 0.02], bal),
        "ringfeed_early": ([1.0, 0.995, 0.99], [0.01, 0.01, 0.01], bal),
        "ringfeed_cpu": ([0.995, 0.99, 0.98], [0.004, 0.006, 0.005], cpu),
        "ringfeed_lib": ([0.96, 0.98, 0.97], [0.02, 0.01, 0.03],
                         dict(bal, decode_threads=16, sched_gpu_permille=64))}, steps={
        # the step's parts: medians over the rounds; ringfeed_lib's runs have none (stored
        # before the example measured them)
        "synthetic": [step_parts(19.6, 19.7, 11.0, 15.0, 0.002)] * 3,
        "ringfeed": [step_parts(20.3, 22.3, 14.3, 283.0), step_parts(19.5, 19.5, 10.3, 270.0),
                     step_parts(20.5, 22.9, 15.1, 288.0)],
        "ringfeed_early": [step_parts(19.5, 19.6, 10.0, 260.0, n) for n in (0.2, 0.25, 0.15)],
        "ringfeed_cpu": [step_parts(19.5, 19.5, 11.6, 255.0)] * 3})}
    md = render(R, tmp_path)
    T = R["photos"]["train"]["resnet18"]["runs"]
    med = {k: statistics.median(r["img_per_s"] for r in v) for k, v in T.items()}
    assert ("### resnet18 training from these shards (bf16, channels_last, batch 256, 400 steps "
            "after 20 of warm-up, python/examples/train_resnet.py; 3 interleaved round(s), "
            "medians)") in md
    assert "### resnet50 training from these shards" not in md
    labels = {k: label for k, label, _ in perf_report.PHOTO_TRAIN_ROWS}
    assert (f"| {labels['synthetic']} | 13,000 | 100.0% |  | 0.0% | 2 us | 19.60 / 19.70 ms | "
            "11.00 ms | 15 ms | - |  |") in md
    for key, each, wait, parts, threads in [
            ("ringfeed", "99.0%, 97.0%, 98.5%", "2.0%",
             "300 us | 20.30 / 22.30 ms | 14.30 ms | 283 ms", 15),
            ("ringfeed_early", "100.0%, 99.5%, 99.0%", "1.0%",
             "200 us | 19.50 / 19.60 ms | 10.00 ms | 260 ms", 15),
            ("ringfeed_cpu", "99.5%, 99.0%, 98.0%", "0.5%",
             "300 us | 19.50 / 19.50 ms | 11.60 ms | 255 ms", 15),
            ("ringfeed_lib", "96.0%, 98.0%, 97.0%", "2.0%", "- | - | - | -", 16)]:
        assert (f"| {labels[key]} | {med[key]:,.0f} | {100 * med[key] / 13000:.1f}% | {each} | "
                f"{wait} | {parts} | {threads} | ") in md
    assert "`--fetch-early`" in labels["ringfeed_early"]
    assert ("`next()` per step: the training thread's time taking the next batch (with "
            "`--fetch-early` while the step runs on the GPU, otherwise after its "
            "synchronization, with the GPU idle") in md
    assert ("step on the GPU: from before the step's first kernel to after its last on the GPU's "
            "own clock (CUDA events), including the gaps in which the GPU waited for the "
            "training thread to launch the next kernel;") in md
    assert ("hardware decoders 0%, GPU kernels 1%, CPU 99%; schedule balance, shares at the end "
            "GPU 0.0% (engines 0.0% of it) in each of the 3 runs |") in md
    assert ("GPU 6.4% (engines 0.0% of it) in each of the 3 runs |") in md
    assert "CPU 100%; schedule cpu |" in md
    assert md.index("![throughput per loader, photographs](photos.png)") < md.index(
        "### resnet18 training from these shards") < md.index("## Decode-thread scaling")
    R["photos"]["train"] = {"unavailable": "not measured: it needs the CUDA backend"}
    md = render(R, tmp_path)
    assert ("**Training on these shards not measured: it needs the CUDA backend**; no figure "
            "stands in for it.") in md
    assert "training from these shards" not in md


def test_photo_first_batch_table_comes_from_its_runs(tmp_path):
    """Every path's first batches in the order they ran, their median and slowest, how many
    came within the target, and the samples decoded by then; a path not measured has no row
    and the note says why."""
    R = json.load(open(RESULTS))
    R["photos"] = photos_results(photo_runs())
    ms = {"ringfeed": [15.2, 12.5, 31.0], "ringfeed_hw100": [23.8, 80.5, 36.2]}
    R["photos"]["first"] = {"rounds": 3, "runs": {
        k: [{"first_batch_ms": m, "next_ms": m - 0.5, "decoded": 300 + 10 * i,
             "create_ms": 540.0} for i, m in enumerate(v)] for k, v in ms.items()}}
    R["photos"]["unavailable"] = {"ringfeed_gpu": "`--device host` decodes on the CPU only"}
    md = render(R, tmp_path)
    assert ("### First batch after create, every path (3 interleaved round(s) of one epoch per "
            "path; the target is 50 ms)") in md
    assert ("| defaults (the balancing scheduler on a CUDA device) | 15.2 ms | 31.0 ms | 3 of 3 "
            "| 15.2, 12.5, 31.0 | 310 |") in md
    assert ("| `--hw-decode 100` (the hardware decoders) | 36.2 ms | 80.5 ms | 2 of 3 | 23.8, "
            "80.5, 36.2 | 310 |") in md
    assert "| `--schedule cpu` |" not in md
    assert "The GPU paths were not measured: `--device host` decodes on the CPU only." in md
    table = md.index("### First batch after create")
    assert md.index("](photos.png)") < table < md.index("## Decode-thread scaling")
