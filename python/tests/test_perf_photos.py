"""tools/perf_report.py's photos section, its data side: the photo set made by
datasets/photos.py in parallel jobs, the class-folder tree made from shards (GNU tar, Python's
tarfile, webdataset's TarWriter), the set's description read from the JPEGs' frame headers, and
the environment the DALI runs get. The rendering is in test_report.py."""
import copy
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from conftest import PHOTO_SOURCES, REPO, shard_jpegs, write_webdataset

sys.path.insert(0, os.path.join(REPO, "tools"))
import perf_report  # noqa: E402
import photos as photo_gen  # noqa: E402  datasets/, on the path perf_report put it

needs_cjpeg = pytest.mark.skipif(
    not shutil.which("cjpeg") or not glob.glob(PHOTO_SOURCES),
    reason="needs cjpeg/djpeg (libjpeg-turbo-progs) and photographs (mate-backgrounds; "
           "tools/deps.sh installs both)")


def cjpeg(*args, side=(333, 251)):
    """A JPEG of a real photograph's pixels cut to side (w, h), encoded by cjpeg with args."""
    with open(sorted(glob.glob(PHOTO_SOURCES))[0], "rb") as f:
        ppm = subprocess.run(["djpeg", "-pnm", "-scale", "1/4"], stdin=f, check=True,
                             capture_output=True).stdout
    W, _, rgb = photo_gen.read_ppm(ppm)
    rows = b"".join(rgb[r * W * 3:(r * W + side[0]) * 3] for r in range(side[1]))
    return subprocess.run(["cjpeg", *args], input=b"P6\n%d %d\n255\n" % side + rows,
                          check=True, capture_output=True).stdout


@needs_cjpeg
@pytest.mark.parametrize("args,name,progressive", [
    (["-sample", "2x2"], "4:2:0", False), (["-sample", "2x1"], "4:2:2", False),
    (["-sample", "1x1"], "4:4:4", False), (["-grayscale"], "grayscale", False),
    (["-sample", "2x2", "-progressive"], "4:2:0", True),
    (["-sample", "2x2", "-restart", "1", "-optimize"], "4:2:0", False)])
def test_frame_header_gives_size_and_subsampling(args, name, progressive):
    assert perf_report.jpeg_frame(cjpeg(*args), "x.jpg") == (333, 251, name, progressive)


@needs_cjpeg
def test_bad_jpegs_are_named_with_their_byte_offset():
    good = cjpeg("-sample", "2x2")
    sof = good.index(b"\xff\xc0")
    cases = [(b"GIF89a" + good[2:], "x.jpg: no JPEG start of image at byte 0"),
             (good[:2] + b"\x00" + good[2:], "x.jpg: byte 2 is not a marker (0x00)"),
             (good[:sof + 9], f"x.jpg: frame header at byte {sof} is cut short"),
             (good[:sof] + b"\xff\xd9", f"x.jpg: no frame header (SOFn) before byte {sof}"),
             (good[:sof] + b"\xff\xe1\x00\x01" + good[sof:],
              f"x.jpg: segment at byte {sof} has length 1")]
    for data, message in cases:
        with pytest.raises(SystemExit) as e:
            perf_report.jpeg_frame(data, "x.jpg")
        assert str(e.value) == message


def gnu_tar_shard(path, samples, workdir):
    """A shard written by GNU tar from files KEY.jpg / KEY.cls ({key: {ext: bytes}})."""
    os.makedirs(workdir)
    names = []
    for key, s in samples.items():
        for ext, data in s.items():
            with open(os.path.join(workdir, f"{key}.{ext}"), "wb") as f:
                f.write(data)
            names.append(f"{key}.{ext}")
    subprocess.run(["tar", "--format=gnu", "-cf", path, "-C", workdir, *names], check=True)


def tarfile_shard(path, samples):
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        for key, s in samples.items():
            for ext, data in s.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


def test_folder_tree_holds_every_shard_image_once(photos, tmp_path):
    """Shards by photos.py (tarfile), GNU tar and webdataset's TarWriter: each image lands at
    CLASS/KEY.jpg byte for byte, so the file readers see the set the shard readers see."""
    plain, _ = photos
    jpegs = shard_jpegs(plain, 12)
    want = {}
    shards = sorted(glob.glob(plain))
    for path in shards:
        for key, s in perf_report.shard_samples(path).items():
            want[(s["cls"][1].decode(), key + ".jpg")] = s["jpg"][1]
    gnu = {f"g{i:04d}": {"jpg": j, "cls": b"%d" % (i % 3)} for i, j in enumerate(jpegs[:6])}
    gnu_tar_shard(str(tmp_path / "gnu.tar"), gnu, str(tmp_path / "gnu"))
    write_webdataset(str(tmp_path / "wds.tar"), jpegs[6:], "cls",
                     [b"%d" % (i + 4) for i in range(6)])
    for key, s in gnu.items():
        want[(s["cls"].decode(), key + ".jpg")] = s["jpg"]
    for i, j in enumerate(jpegs[6:]):
        want[(str(i + 4), f"{i:08d}.jpg")] = j
    shards += [str(tmp_path / "gnu.tar"), str(tmp_path / "wds.tar")]
    made = perf_report.photo_folder(shards, str(tmp_path / "tree"))
    got = {}
    for p in made:
        with open(p, "rb") as f:
            got[(os.path.basename(os.path.dirname(p)), os.path.basename(p))] = f.read()
    assert len(made) == len(got) == len(want) and got == want
    assert sorted(glob.glob(str(tmp_path / "tree" / "*" / "*.jpg"))) == sorted(made)


def test_folder_tree_refuses_bad_labels_and_missing_members(tmp_path):
    jpg = b"\xff\xd8\xff\xd9"
    for name, samples, message in [
            ("label.tar", {"a": {"jpg": jpg, "cls": b"3"}, "b": {"jpg": jpg, "cls": b"cat"}},
             "b.cls at byte 3584: label 'cat' is not a class number"),
            ("nocls.tar", {"a": {"jpg": jpg, "cls": b"1"}, "b": {"jpg": jpg}},
             "sample b (member at byte 2048) has no .jpg or no .cls member")]:
        tarfile_shard(str(tmp_path / name), samples)
        with pytest.raises(SystemExit) as e:
            perf_report.photo_folder([str(tmp_path / name)], str(tmp_path / "tree"))
        assert str(e.value) == f"{tmp_path / name}: {message}"


def test_oversized_member_is_refused_naming_its_offset(tmp_path, monkeypatch):
    monkeypatch.setattr(perf_report, "PHOTO_MAX_FILE", 100)
    tarfile_shard(str(tmp_path / "big.tar"), {"a": {"cls": b"1", "jpg": bytes(101)}})
    with pytest.raises(SystemExit) as e:
        perf_report.shard_samples(str(tmp_path / "big.tar"))
    assert str(e.value) == (f"{tmp_path / 'big.tar'}: member a.jpg at byte 1024 has 101 "
                            "bytes, over the 100 a photo crop may have")


@needs_cjpeg
def test_photo_set_does_not_depend_on_the_process_count(tmp_path, monkeypatch):
    """Jobs start at multiples of PHOTO_JOB with their job number as seed: one process or
    three write the same shards, every image once, and the description counts them."""
    monkeypatch.setattr(perf_report, "PHOTO_JOB", 128)
    env = dict(os.environ)
    one = perf_report.make_photos(str(tmp_path / "one"), 300, PHOTO_SOURCES, 1, env)
    three = perf_report.make_photos(str(tmp_path / "three"), 300, PHOTO_SOURCES, 3, env)
    assert [os.path.basename(p) for p in one] == ["photos-%06d.tar" % i for i in range(3)]
    for a, b in zip(one, three):
        with open(a, "rb") as fa, open(b, "rb") as fb:
            assert fa.read() == fb.read()
    files = perf_report.photo_folder(one, str(tmp_path / "tree"))
    assert sorted(os.path.basename(p) for p in files) == ["%08d.jpg" % i for i in range(300)]
    d = perf_report.describe_photos(files, one, PHOTO_SOURCES)
    sizes = [os.path.getsize(p) for p in files]
    assert (d["images"], d["shards"], d["bytes"]) == (300, 3, sum(sizes))
    assert (d["min_bytes"], d["max_bytes"]) == (min(sizes), max(sizes))
    assert d["sampling"] == {"4:2:0": 300} and d["progressive"] == 0
    assert 200 <= d["width"][0] <= d["width"][1] <= 900
    assert d["source_files"] == len(glob.glob(PHOTO_SOURCES))


def test_missing_sources_or_encoder_stop_with_a_message(tmp_path):
    with pytest.raises(SystemExit) as e:
        perf_report.make_photos(str(tmp_path / "p"), 10, str(tmp_path / "none-*.jpg"), 1,
                                dict(os.environ))
    assert "no photographs match --photo-sources" in str(e.value)
    src = tmp_path / "a.jpg"
    src.write_bytes(b"\xff\xd8")
    with pytest.raises(SystemExit) as e:
        perf_report.make_photos(str(tmp_path / "p"), 10, str(src), 1,
                                dict(os.environ, PATH=str(tmp_path)))
    assert str(e.value).startswith("photos: no cjpeg on PATH")


def test_dali_gets_its_folder_first_and_the_others_nothing():
    env = {"PYTHONPATH": "/repo/python", "LD_LIBRARY_PATH": "/repo/build/lib", "X": "1"}
    d = perf_report.dali_env(env, "/opt/site")
    assert d["PYTHONPATH"] == "/opt/site:/repo/python"
    assert d["LD_LIBRARY_PATH"] == "/opt/site/nvidia/cu13/lib:/repo/build/lib"
    assert d["X"] == "1" and env["PYTHONPATH"] == "/repo/python"  # the caller's is untouched
    assert perf_report.dali_env(env, None) is env


def test_importable_says_why_not():
    assert perf_report.importable("json, tarfile", dict(os.environ)) is None
    why = perf_report.importable("no_such_module_rf", dict(os.environ))
    assert why == "ModuleNotFoundError: No module named 'no_such_module_rf'"


@needs_cjpeg
def test_a_set_made_with_the_same_arguments_is_kept(tmp_path, monkeypatch):
    """The photos' training rows run in a command of their own: the set the loading rows read
    is kept when set.json names the same images and sources, and made again when not."""
    monkeypatch.setattr(perf_report, "PHOTO_JOB", 128)
    env = dict(os.environ)
    root = str(tmp_path / "set")
    first = perf_report.make_photos(root, 130, PHOTO_SOURCES, 2, env)
    stamp = {p: os.stat(p).st_mtime_ns for p in first}

    def no_job(cmd, env=None, timeout=900):
        raise AssertionError(f"the kept set was made again: {cmd}")
    with monkeypatch.context() as m:
        m.setattr(perf_report, "sh", no_job)
        assert perf_report.make_photos(root, 130, PHOTO_SOURCES, 2, env) == first
    assert {p: os.stat(p).st_mtime_ns for p in first} == stamp
    again = perf_report.make_photos(root, 140, PHOTO_SOURCES, 2, env)  # another image count
    assert len(again) == 2 and all(os.stat(p).st_mtime_ns != stamp[p] for p in first)
    d = perf_report.describe_photos(perf_report.photo_folder(again, str(tmp_path / "t")),
                                    again, PHOTO_SOURCES)
    assert d["images"] == 140
    os.remove(os.path.join(root, "set.json"))  # a set cut short by a failed job
    calls = []
    with monkeypatch.context() as m:
        m.setattr(perf_report, "sh", lambda cmd, env=None, timeout=900: calls.append(cmd))
        perf_report.make_photos(root, 140, PHOTO_SOURCES, 2, env)
    assert len(calls) == 2  # both jobs run again


def test_a_part_run_alone_keeps_the_other_parts_figures_of_the_same_set(tmp_path, monkeypatch):
    """--skip photos_load or photos_train: the part not run keeps its stored figures, and a
    set that differs from theirs stops the run before any figure is measured."""
    desc = {"images": 10240, "sources": "x/*.jpg"}
    monkeypatch.setattr(perf_report, "make_photos", lambda *a: ["s.tar"])
    monkeypatch.setattr(perf_report, "photo_folder", lambda *a: ["f.jpg"])
    monkeypatch.setattr(perf_report, "describe_photos", lambda *a: dict(desc))
    monkeypatch.setattr(perf_report, "warm", lambda paths: None)
    ran = []
    monkeypatch.setattr(perf_report, "photos_load",
                        lambda a, P, *rest: (ran.append("load"), P.update(rows=["new"])))
    monkeypatch.setattr(perf_report, "photos_train",
                        lambda a, P, *rest: (ran.append("train"),
                                             P.setdefault("train", {}).update(resnet50="new")))
    a = type("A", (), {"data": str(tmp_path / "d"), "photo_images": 10240, "cpus": 16,
                       "photo_sources": "x/*.jpg", "device": "cuda"})()
    stored = {"set": dict(desc), "rows": ["old"], "rounds": 1, "unavailable": {},
              "first": {"rounds": 1, "runs": {"ringfeed": "old"}}, "train": {"resnet18": "old"}}
    R = {"photos": copy.deepcopy(stored)}
    perf_report.photos_section(a, R, {}, "bench", lambda: None, {"photos_load"})
    assert ran == ["train"] and R["photos"]["rows"] == ["old"]
    assert R["photos"]["first"] == stored["first"]  # the loading part's first batches too
    assert R["photos"]["train"] == {"resnet18": "old", "resnet50": "new"}
    R = {"photos": copy.deepcopy(stored)}
    perf_report.photos_section(a, R, {}, "bench", lambda: None, {"photos_train"})
    assert ran == ["train", "load"] and R["photos"]["rows"] == ["new"]
    assert R["photos"]["train"] == {"resnet18": "old"}
    for skip in ({"photos_load"}, {"photos_train"}):
        R = {"photos": dict(copy.deepcopy(stored), set={"images": 640, "sources": "x/*.jpg"})}
        with pytest.raises(SystemExit) as e:
            perf_report.photos_section(a, R, {}, "bench", lambda: None, skip)
        assert str(e.value).startswith("photos: the stored figures were measured on another "
                                       "set ({'images': 640")
    assert ran == ["train", "load"]
    # the same set from photographs found in another folder: the stored part stands
    R = {"photos": dict(copy.deepcopy(stored), set=dict(desc, sources="y/*.jpg"))}
    perf_report.photos_section(a, R, {}, "bench", lambda: None, {"photos_load"})
    assert R["photos"]["rows"] == ["old"] and R["photos"]["set"]["sources"] == "x/*.jpg"
    R = {"photos": dict(copy.deepcopy(stored), set={"images": 640})}  # both parts: made anew
    perf_report.photos_section(a, R, {}, "bench", lambda: None, set())
    assert R["photos"]["rows"] == ["new"] and R["photos"]["train"] == {"resnet50": "new"}


def test_an_unknown_skip_name_stops_before_anything_runs(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(REPO, "tools", "perf_report.py"),
                        "--out", str(tmp_path / "out"), "--skip", "side,photo_train"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and not (tmp_path / "out").exists()
    assert (f"--skip: no section photo_train (sections: {', '.join(perf_report.SECTIONS)}; "
            "parts: scaling_cpu, photos_load, photos_train)") in p.stderr
    assert "multicrop, targets;" in p.stderr  # the sections added last are named too


def test_first_batch_runs_take_every_path_in_rounds(monkeypatch):
    """photos_first: one epoch of every path once per round, in PHOTO_FIRST's order, with the
    path's own arguments; a tool that is unavailable is left out; the figures are saved after
    every round."""
    calls, saved = [], []

    def bench(cmd, env=None, timeout=900):
        calls.append(cmd)
        n = len(calls)
        return "progress\n" + json.dumps({"first_batch_ms": 10.0 + n, "create_ms": 500.0 + n,
                                          "first_batch": {"next_ms": 9.0 + n,
                                                          "decoded": 256 + n}})
    monkeypatch.setattr(perf_report, "sh", bench)
    a = type("A", (), {"photo_first_rounds": 2, "device": "cuda", "cpus": 16})()
    P = {"unavailable": {"ringfeed_gpu": "why"}}
    perf_report.photos_first(a, P, {}, "bench", lambda: saved.append(P["first"]["rounds"]),
                             "wds/*.tar")
    cpu_paths = [p for p in perf_report.PHOTO_FIRST if p[2] != "ringfeed_gpu"]
    assert len(calls) == 2 * len(cpu_paths) and saved == [1, 2]
    for i, cmd in enumerate(calls):
        key, _, _, args = cpu_paths[i % len(cpu_paths)]
        assert cmd[:3] == ["bench", "--shards", "wds/*.tar"] and cmd[3:3 + len(args)] == args
        assert cmd[cmd.index("--epochs") + 1] == "1" and "--json" in cmd
    runs = P["first"]["runs"]
    assert set(runs) == {p[0] for p in cpu_paths}
    assert runs["ringfeed"] == [
        {"first_batch_ms": 11.0, "next_ms": 10.0, "decoded": 257, "create_ms": 501.0},
        {"first_batch_ms": 11.0 + len(cpu_paths), "next_ms": 10.0 + len(cpu_paths),
         "decoded": 257 + len(cpu_paths), "create_ms": 501.0 + len(cpu_paths)}]
