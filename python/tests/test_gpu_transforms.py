"""The per-batch transform recipe of docs/python.md (ringfeed.transforms: augmented(),
seeded(), batch_seed(), default_transform()), which python/examples/gpu_transforms.py imports
and times: torchvision.transforms.v2 on the batch tensor, on its own device and torch's current
stream, then normalization. Runs on the host backend (CPU tensors) everywhere, and on CUDA
where torch sees a GPU and libringfeed has the CUDA backend. Skipped without torch or
torchvision."""
import importlib.util
import io
import json
import os
from contextlib import redirect_stdout

import numpy as np
import pytest

torch = pytest.importorskip("torch")
v2 = pytest.importorskip("torchvision.transforms.v2")
import ringfeed  # noqa: E402
from ringfeed import _capi as C  # noqa: E402
from ringfeed import transforms as T  # noqa: E402
from conftest import REPO  # noqa: E402


def load_example():
    path = os.path.join(REPO, "python", "examples", "gpu_transforms.py")
    spec = importlib.util.spec_from_file_location("gpu_transforms_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ex = load_example()
MEAN, STD = ringfeed.IMAGENET_MEAN, ringfeed.IMAGENET_STD
KW = dict(size=32, layout="NHWC", dtype="uint8", seed=9)


def devices():
    out = ["cpu"]
    if torch.cuda.is_available() and C.cuda_device_count() > 0:
        out.append("cuda:0")
    return out


def recipe(shards, device, transform, per_sample=False, decode_threads=2):
    """One epoch through the recipe, as CPU tensors (images) and labels."""
    with ringfeed.Loader(shards, 8, device=device, decode_threads=decode_threads, **KW) as ld:
        return [(x.cpu(), y.cpu()) for x, y in
                T.augmented(ld, transform, MEAN, STD, seed=3, per_sample=per_sample)]


@pytest.mark.parametrize("device", devices())
def test_recipe_applies_the_transform_to_the_batch(shards, device):
    """A deterministic transform (a flip every time) gives the untransformed batch flipped,
    normalized with mean/std in pixel units, as an NCHW tensor on the loader's device."""
    plain = recipe(shards, device, None)
    flipped = recipe(shards, device, v2.RandomHorizontalFlip(p=1.0))
    assert len(plain) == len(flipped) > 1
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    with ringfeed.Loader(shards, 8, device="cpu", array_type="numpy", copy=True, **KW) as ld:
        raw = [np.array(b.images) for b in ld]
    for (p, py), (f, fy), r in zip(plain, flipped, raw):
        assert p.shape == (r.shape[0], 3, 32, 32) and p.dtype == torch.float32
        want = (torch.from_numpy(r).permute(0, 3, 1, 2).float() - mean) / std
        assert torch.allclose(p, want, atol=1e-5)
        assert torch.equal(f, p.flip(-1))
        assert torch.equal(py, fy)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("per_sample", [False, True])
def test_recipe_is_reproducible(shards, device, per_sample):
    """Random transforms draw from generators seeded per batch: the same tensors at 1 and 3
    decode threads (two runs), and the caller's random state untouched."""
    jitter = v2.ColorJitter(brightness=0.5, contrast=0.5, saturation=0.5)
    torch.manual_seed(1234)
    before = torch.rand(4)
    torch.manual_seed(1234)
    a = recipe(shards, device, jitter, per_sample, decode_threads=1)
    assert torch.equal(torch.rand(4), before), "the recipe moved the caller's generator"
    b = recipe(shards, device, jitter, per_sample, decode_threads=3)
    plain = recipe(shards, device, None)
    for (xa, ya), (xb, yb), (xp, _) in zip(a, b, plain):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
        assert not torch.equal(xa, xp), "the transform changed nothing"


@pytest.mark.parametrize("device", devices())
def test_per_sample_draws_once_per_image(shards, device):
    """v2 draws once per call: batch-wise, a coin-flip flip turns a whole batch or none of it;
    per_sample=True flips each image on its own draw (some batches mixed)."""
    coin = v2.RandomHorizontalFlip(p=0.5)
    plain = recipe(shards, device, None)
    for per_sample in (False, True):
        mixed = 0
        for (x, _), (p, _) in zip(recipe(shards, device, coin, per_sample), plain):
            flips = {bool(torch.equal(x[i], p[i].flip(-1))) for i in range(x.shape[0])}
            assert all(torch.equal(x[i], p[i]) or torch.equal(x[i], p[i].flip(-1))
                       for i in range(x.shape[0]))
            mixed += len(flips) > 1
        assert (mixed > 0) == per_sample, (per_sample, mixed)


def test_script_prints_the_measured_cost(shards):
    """The example's JSON line: ms per batch without and with the transforms, and the
    transforms' own time (host backend here; the GPU machine runs it with --device cuda)."""
    out = io.StringIO()
    with redirect_stdout(out):
        ex.main(["--shards", shards, "--device", "cpu", "--batch", "4", "--size", "32",
                 "--batches", "3", "--warmup", "1", "--decode-threads", "2"])
    rec = json.loads(out.getvalue().strip().splitlines()[-1])
    assert rec["device"] == "cpu" and rec["batches"] == 3 and rec["batch"] == 4
    for k in ("ms_per_batch_plain", "ms_per_batch_transforms", "transform_ms_per_batch"):
        assert rec[k] > 0, k


def test_example_imports_the_package_recipe():
    """The example times the package's functions, not copies of them."""
    assert ex.augmented is T.augmented and ex.default_transform is T.default_transform


def test_batch_seed_and_seeded():
    """batch_seed depends on (seed, epoch, index) only and fits torch's seed; seeded() gives
    the same draws for the same seed and leaves the caller's generator as it was."""
    seeds = {T.batch_seed(s, e, i) for s in range(3) for e in range(3) for i in range(3)}
    assert len(seeds) == 27 and all(0 <= v < 2**63 for v in seeds)
    assert T.batch_seed(1, 2, 3) == T.batch_seed(1, 2, 3)
    x = torch.zeros(4, 3, 8, 8)
    noise = lambda t: t + torch.rand(t.shape)  # noqa: E731
    torch.manual_seed(5)
    before = torch.rand(2)
    torch.manual_seed(5)
    a, b = T.seeded(noise, x, 11), T.seeded(noise, x, 11)
    assert torch.equal(a, b) and not torch.equal(a, T.seeded(noise, x, 12))
    assert torch.equal(torch.rand(2), before)
    per = T.seeded(noise, x, 11, per_sample=True)
    assert per.shape == x.shape and not torch.equal(per[0], per[1])


def test_default_transform_is_photometric():
    """Colour jitter and random grayscale: shape and dtype kept on a uint8 NCHW batch."""
    x = torch.randint(0, 256, (2, 3, 16, 16), dtype=torch.uint8)
    y = T.seeded(T.default_transform(), x, 7)
    assert y.shape == x.shape and y.dtype == torch.uint8
