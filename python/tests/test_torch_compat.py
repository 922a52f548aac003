"""A Loader with torch.utils.data: DataLoader(loader, batch_size=None) yields the loader's own
batches, the same as iterating the loader; worker processes and a batch_size are refused
naming the fix; Lightning's and Accelerate's checkpoints restore a loader mid-epoch at the
batch that came next (each when installed: pip install lightning, accelerate, torchdata)."""
import glob
import os

import numpy as np
import pytest

import ringfeed
from conftest import make_shards, run_python

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, IterableDataset  # noqa: E402

KW = dict(batch_size=8, size=24, device="cpu", decode_threads=2, seed=5)
EPOCHS = 2


@pytest.fixture(scope="module")
def pattern(tmp_path_factory, lib):
    """40 samples, 5 batches of 8 an epoch: checkpoints fall inside epochs."""
    return make_shards(str(tmp_path_factory.mktemp("torchcompat")), 40, 5, 20, max_side=48)


def record(batch):
    """What identifies a batch: its epoch, samples and labels, and its pixels (not its index,
    which a resumed loader counts from the position it resumed at)."""
    images = batch.images.numpy() if hasattr(batch.images, "numpy") else batch.images
    return (int(batch.epoch), tuple(int(s) for s in batch.sample_ids),
            tuple(int(x) for x in batch.labels), np.asarray(images).copy())


def same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x[:3] == y[:3]
        np.testing.assert_array_equal(x[3], y[3])


def direct(pattern, epochs=EPOCHS, **kw):
    with ringfeed.Loader(pattern, **dict(KW, **kw)) as ld:
        return [record(b) for _ in range(epochs) for b in ld]


def test_a_loader_is_an_iterable_dataset(pattern):
    with ringfeed.Loader(pattern, **KW) as ld:
        assert isinstance(ld, IterableDataset)
    assert issubclass(ringfeed.Loader, IterableDataset)
    assert issubclass(ringfeed.TokenLoader, IterableDataset)


@pytest.mark.parametrize("torch_first", [True, False])
def test_registered_whichever_comes_first(pattern, torch_first):
    """Registered at `import ringfeed` when torch is imported already, otherwise by the first
    loader made (which imports torch)."""
    code = (
        "import sys\n"
        + ("import torch\n" if torch_first else "")
        + "import ringfeed\n"
        + ("" if torch_first else "assert 'torch' not in sys.modules\n")
        + f"ld = ringfeed.Loader({pattern!r}, 8, size=24, device='cpu', decode_threads=1)\n"
        "from torch.utils.data import DataLoader, IterableDataset\n"
        "assert isinstance(ld, IterableDataset)\n"
        "print(sum(b.count for b in DataLoader(ld, batch_size=None)))\n")
    p = run_python(code, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["40"]


def test_dataloader_yields_the_loaders_batches(pattern):
    want = direct(pattern)
    with ringfeed.Loader(pattern, **KW) as ld:
        dl = DataLoader(ld, batch_size=None)
        assert len(dl) == len(ld) == 5
        got = []
        for _ in range(EPOCHS):
            for b in dl:
                assert type(b) is ringfeed.Batch  # the loader's own object, not a copy
                got.append(record(b))
    same(got, want)
    assert [g[0] for g in got] == [e for e in range(EPOCHS) for _ in range(5)]


def test_worker_processes_are_refused_naming_the_fix(pattern):
    with ringfeed.Loader(pattern, **KW) as ld:
        # fork: the workers would iterate the loader's copy, whose threads did not come along
        with pytest.raises(RuntimeError) as ei:
            next(iter(DataLoader(ld, batch_size=None, num_workers=2)))
        msg = str(ei.value)
        assert "ringfeed.Loader cannot be iterated in DataLoader worker processes" in msg
        assert "(num_workers=2)" in msg and "num_workers=0" in msg
        assert "iterate the loader itself" in msg
        # spawn and forkserver pickle the dataset for the workers
        with pytest.raises(TypeError, match=r"cannot be pickled.*num_workers=0"):
            next(iter(DataLoader(ld, batch_size=None, num_workers=1,
                                 multiprocessing_context="spawn")))
        # neither took a batch: the epoch is whole
        assert sum(b.count for b in ld) == 40
        # batch_size=1 (the default) collates the first batch it takes
        with pytest.raises(TypeError, match=r"use DataLoader\(loader, batch_size=None\)"):
            next(iter(DataLoader(ld)))


# ---- checkpoints of Lightning and Accelerate -------------------------------------------------


def lightning_run(pattern, ckpt_dir, wrap, resume=None):
    """Fit EPOCHS epochs (or the rest, from checkpoint `resume`) and return what each training
    step saw; a checkpoint is written after every third step."""
    pl = pytest.importorskip("lightning.pytorch")

    class Model(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(1, 1)
            self.seen = []

        def training_step(self, batch, batch_idx):
            self.seen.append(record(batch))
            x = torch.as_tensor(batch.images).float().mean().view(1, 1)
            return self.lin(x).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    every = pl.callbacks.ModelCheckpoint(dirpath=ckpt_dir, filename="{step}",
                                         every_n_train_steps=3, save_top_k=-1)
    trainer = pl.Trainer(max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[every], num_sanity_val_steps=0)
    model = Model()
    with ringfeed.Loader(pattern, **KW) as ld:
        trainer.fit(model, train_dataloaders=wrap(ld), ckpt_path=resume)
    return model.seen


def _stateful(ld):
    tdl = pytest.importorskip("torchdata.stateful_dataloader")
    return tdl.StatefulDataLoader(ld, batch_size=None)


@pytest.mark.parametrize("wrap", [lambda ld: ld, _stateful], ids=["loader", "StatefulDataLoader"])
def test_lightning_resumes_mid_epoch(pattern, tmp_path, wrap):
    full = lightning_run(pattern, str(tmp_path / "full"), wrap)
    same(full, direct(pattern))
    ckpts = sorted(glob.glob(str(tmp_path / "full" / "step=*.ckpt")))
    assert [os.path.basename(c) for c in ckpts] == ["step=3.ckpt", "step=6.ckpt",
                                                    "step=9.ckpt"]
    for step in (3, 6):  # inside epoch 0, and one batch into epoch 1
        ckpt = str(tmp_path / "full" / f"step={step}.ckpt")
        rest = lightning_run(pattern, str(tmp_path / f"from{step}"), wrap, resume=ckpt)
        same(rest, full[step:])


def accelerate_run(pattern, ckpt_dir, how, resume=None, save_after=None, steps=EPOCHS * 5):
    """`steps` batches, epoch after epoch (from the state in `resume`: a prepared DataLoader
    restores its dataset's state when its next epoch starts); save_state after step
    `save_after`. how="prepare": through a DataLoader that Accelerate prepared with its
    stateful-dataloader support and without dispatching (ringfeed splits by rank itself); it
    reads one batch ahead of the step, so the loader owns its batches (copy=True).
    how="register": the loader iterated as it is, its state registered for checkpointing."""
    accelerate = pytest.importorskip("accelerate")
    from accelerate.state import AcceleratorState, GradientState
    from accelerate.utils import DataLoaderConfiguration
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    if how == "prepare":
        pytest.importorskip("torchdata.stateful_dataloader")
        cfg = DataLoaderConfiguration(dispatch_batches=False, use_stateful_dataloader=True)
        acc = accelerate.Accelerator(cpu=True, dataloader_config=cfg)
    else:
        acc = accelerate.Accelerator(cpu=True)
    seen = []
    with ringfeed.Loader(pattern, copy=how == "prepare", **KW) as ld:
        if how == "prepare":
            batches = acc.prepare(DataLoader(ld, batch_size=None))
        else:
            acc.register_for_checkpointing(ld)
            batches = ld
        if resume:
            acc.load_state(resume)
        while len(seen) < steps:
            for b in batches:
                seen.append(record(b))
                if len(seen) == save_after:
                    acc.save_state(ckpt_dir)
    return seen


@pytest.mark.parametrize("how", ["prepare", "register"])
def test_accelerate_resumes_mid_epoch(pattern, tmp_path, how):
    want = direct(pattern)
    for step in (3, 6):
        ckpt = str(tmp_path / f"step{step}")
        same(accelerate_run(pattern, ckpt, how, save_after=step), want)
        same(accelerate_run(pattern, ckpt, how, resume=ckpt, steps=len(want) - step),
             want[step:])
