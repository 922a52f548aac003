"""Fixtures: the library and the dataset generator (found like the library), small shards."""
import glob
import os
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# PYTHONPATH=python without asking, unless RINGFEED_TEST_INSTALLED=1 asks for the ringfeed that
# pip installed (the wheel on the GPU machine: docs/gpu.md); test_import checks which one it is.
if os.environ.get("RINGFEED_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(REPO, "python"))

import ringfeed  # noqa: E402
from ringfeed import _capi  # noqa: E402

# The folder the imported ringfeed package is in (the checkout's python/, or site-packages):
# child interpreters get it first on PYTHONPATH, so they import the same package.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(ringfeed.__file__)))

N_IMAGES = 50
N_CLASSES = 7
PER_SHARD = 16


def find_tool(subdir, name, env_var):
    """A built tool: $env_var, else beside the library (build/<subdir>/<name>), else the
    newest build*/ of the checkout, else PATH; None when there is none."""
    env = os.environ.get(env_var)
    if env:
        return env
    lib = _capi.library_path()
    cands = []
    if lib and os.sep in lib:
        cands.append(os.path.join(os.path.dirname(lib), subdir, name))
    cands += sorted(glob.glob(os.path.join(REPO, "build*", subdir, name)),
                    key=os.path.getmtime, reverse=True)
    cands.append(shutil.which(name) or "")
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    return None


def find_gen():
    return find_tool("datasets", "ringfeed-gen", "RINGFEED_GEN")


def make_shards(dirname, images, classes, per_shard, seed=1, max_side=96):
    gen = find_gen()
    if gen is None:
        pytest.skip("ringfeed-gen not found (build it: make -C build ringfeed-gen, or set "
                    "RINGFEED_GEN)")
    os.makedirs(dirname, exist_ok=True)
    subprocess.run([gen, "--output", os.path.join(dirname, "train-%06d.tar"), "--images",
                    str(images), "--classes", str(classes), "--per-shard", str(per_shard),
                    "--seed", str(seed), "--max-side", str(max_side), "--quiet"], check=True)
    return os.path.join(dirname, "train-*.tar")


def shard_jpegs(pattern, n):
    """The first n JPEGs (bytes) of the shards at pattern, in shard and member order, read
    with tarfile: images for tests that write their own shards or folders."""
    out = []
    for path in sorted(glob.glob(pattern)):
        with tarfile.open(path) as tf:
            out += [tf.extractfile(m).read() for m in tf if m.name.endswith(".jpg")]
    assert len(out) >= n
    return out[:n]


def shard_sources(pattern):
    """{key: PIL RGB image} of every JPEG in the shards at pattern, read with tarfile and
    decoded by PIL: the reference the pixel tests resize themselves."""
    import io
    from PIL import Image
    out = {}
    for path in sorted(glob.glob(pattern)):
        with tarfile.open(path) as t:
            for m in t.getmembers():
                if m.name.endswith(".jpg"):
                    data = t.extractfile(m).read()
                    out[m.name[:-4]] = Image.open(io.BytesIO(data)).convert("RGB")
    return out


def map_boxes(boxes, crop, flip, size, min_vis=0.0):
    """The reference for boxes that follow a crop: xyxy boxes (k, 4) in source pixels through
    crop (x, y, w, h) onto an output of size (H, W) and the flip, clipped to it; the kept rows
    (clipped area > 0 and >= min_vis of the mapped box's) and their indexes."""
    H, W = size
    x, y, cw, ch = (float(v) for v in crop)
    m = (boxes - [x, y, x, y]) * [W / cw, H / ch, W / cw, H / ch]
    if flip:
        m = np.stack([W - m[:, 2], m[:, 1], W - m[:, 0], m[:, 3]], 1)
    area = (m[:, 2] - m[:, 0]) * (m[:, 3] - m[:, 1])
    c = np.clip(m, 0, [W, H, W, H])
    seen = np.clip(c[:, 2] - c[:, 0], 0, None) * np.clip(c[:, 3] - c[:, 1], 0, None)
    keep = (seen > 0) & (seen >= min_vis * area)
    return c[keep], np.flatnonzero(keep)


def map_points(pts, crop, flip, size):
    """map_boxes' for points {x, y, v} (k, 3): v 0 outside the output, a v 0 point zeros."""
    H, W = size
    x, y, cw, ch = (float(v) for v in crop)
    px = (pts[:, 0] - x) * W / cw
    px = W - px if flip else px
    py = (pts[:, 1] - y) * H / ch
    inside = (px >= 0) & (px <= W) & (py >= 0) & (py <= H)
    v = np.where(inside, pts[:, 2], 0)
    out = np.stack([px, py, v], 1)
    out[pts[:, 2] == 0] = 0
    return out


def write_tar(path, members):
    """A shard of the (name, bytes) members in their order, written by Python's tarfile (PAX);
    returns {name: offset of its header}, what error messages name."""
    import io
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    with tarfile.open(path) as tf:
        return {m.name: m.offset for m in tf}


def write_webdataset(path, jpegs, ext, values):
    """A shard by webdataset's own TarWriter: sample i is KEY.jpg (key "%08d" % i) plus
    KEY.<ext> holding values[i] (bytes written as they are) unless it is None."""
    wds = pytest.importorskip("webdataset")
    with wds.TarWriter(path) as sink:
        for i, (jpg, v) in enumerate(zip(jpegs, values)):
            sample = {"__key__": f"{i:08d}", "jpg": jpg}
            if v is not None:
                sample[ext] = v
            sink.write(sample)


def labels_once(loader):
    """{key: label} of one epoch's samples (padding left out), asserting that none comes
    twice."""
    seen = {}
    for b in loader:
        for k, lab, pad in zip(b.keys, b.labels, b.is_padding):
            if not pad:
                assert k not in seen
                seen[k] = int(lab)
    return seen


def shard_labels(pattern):
    """{key: label} read from the shards' .cls members with tarfile."""
    out = {}
    for path in sorted(glob.glob(pattern)):
        with tarfile.open(path) as tf:
            for m in tf:
                if m.isfile() and m.name.endswith(".cls"):
                    out[m.name[:-4]] = int(tf.extractfile(m).read().decode().strip())
    return out


@pytest.fixture(scope="session")
def lib():
    return _capi.lib()  # loaded by `import ringfeed` above, which fails without one


@pytest.fixture(scope="session")
def shards(tmp_path_factory, lib):
    d = tmp_path_factory.mktemp("shards")
    return make_shards(str(d), N_IMAGES, N_CLASSES, PER_SHARD)


def rewrite_shards(pattern, outdir, edit=lambda name, data: data, fmt=tarfile.PAX_FORMAT):
    """The shards at `pattern` written again into outdir by Python's tarfile (`fmt`), each
    member's bytes through edit(name, data); returns the new pattern."""
    import io
    os.makedirs(outdir, exist_ok=True)
    for path in sorted(glob.glob(pattern)):
        out = os.path.join(outdir, os.path.basename(path))
        with tarfile.open(path) as src, tarfile.open(out, "w", format=fmt) as dst:
            for m in src:
                data = edit(m.name, src.extractfile(m).read())
                info = tarfile.TarInfo(m.name)
                info.size = len(data)
                dst.addfile(info, io.BytesIO(data))
    return os.path.join(outdir, os.path.basename(pattern))


def epoch_images(ld):
    """{key: image} of one epoch of the open loader ld: each real sample's image as a host
    array of its own (a device batch copied to the host)."""
    out = {}
    for b in ld:
        images = b.images.cpu().numpy() if hasattr(b.images, "cpu") else b.images
        for k, img, pad in zip(b.keys, images, b.is_padding):
            if not pad:
                out[k] = np.asarray(img).copy()
    return out


PHOTOS = 160
PHOTO_SOURCES = os.environ.get("RINGFEED_PHOTO_SOURCES",
                               "/usr/share/backgrounds/mate/nature/*.jpg")


@pytest.fixture(scope="session")
def photos(tmp_path_factory, lib):
    """(plain, restart-marked) shard patterns of PHOTOS crops of real photographs
    (datasets/photos.py; RINGFEED_PHOTO_SOURCES: another glob of photographs)."""
    if not shutil.which("cjpeg") or not glob.glob(PHOTO_SOURCES):
        pytest.skip("needs cjpeg/djpeg (libjpeg-turbo-progs) and photographs (mate-backgrounds; "
                    "tools/deps.sh installs both)")
    d = tmp_path_factory.mktemp("photos")
    subprocess.run([sys.executable, os.path.join(REPO, "datasets", "photos.py"), "--output",
                    str(d / "plain" / "p-%04d.tar"), "--images", str(PHOTOS), "--per-shard",
                    "64", "--seed", "11", "--sources", PHOTO_SOURCES], check=True)
    plain = str(d / "plain" / "p-*.tar")
    return plain, with_restarts(plain, str(d / "restart"))


def with_restarts(pattern, outdir):
    """The shards at `pattern` rewritten into outdir with ringfeed.add_restarts applied to
    every JPEG (what ringfeed-pack --restart writes); returns the new pattern."""
    def edit(name, data):
        if name.endswith(".jpg"):
            data = ringfeed.add_restarts(data)
            assert b"\xff\xdd" in data[:data.index(b"\xff\xda")]  # a DRI segment
        return data
    return rewrite_shards(pattern, outdir, edit)


@pytest.fixture(scope="session")
def restart_shards(shards, tmp_path_factory):
    return with_restarts(shards, str(tmp_path_factory.mktemp("restart")))


@pytest.fixture(scope="session")
def labels_by_key(shards):
    return shard_labels(shards)


def have_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


ARRAY_TYPES = ["numpy"] + (["torch"] if have_torch() else [])


def run_python(code, *args, env=None, timeout=120, lib=None, package_root=None, cwd=None):
    """Run `code` in a fresh interpreter with the binding and library this process uses (what
    a crash or a process-wide setting must not reach pytest's own process), or with the
    library at `lib` and the ringfeed package found in the folder `package_root`; returns the
    CompletedProcess. A signal shows as a negative returncode."""
    full = dict(os.environ if env is None else env)
    root = package_root or PACKAGE_ROOT
    full["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [full.get("PYTHONPATH")] if p])
    lib = lib or _capi.library_path()
    if lib and os.sep in lib:
        full["RINGFEED_LIB"] = lib
    return subprocess.run([sys.executable, "-c", code, *args], env=full, capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)
