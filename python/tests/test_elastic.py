"""Ranks as torchrun runs them, one process each with RANK and WORLD_SIZE in its environment,
on the host (no GPU): the union of every rank's keys is each sample once per epoch, and an
elastic restart (one rank killed mid-epoch, the group torn down, every rank resumed from the
last checkpoint at another world size) loses and repeats nothing."""
import glob
import os
import pickle
import signal
import subprocess
import sys
import time

import pytest

from conftest import PACKAGE_ROOT, make_shards

N = 160
BATCH = 4

# One rank of a training job: after each step it writes the step's keys and the loader's
# state together (a checkpoint), renamed into place so that a kill never leaves half of one,
# and waits for the other ranks' step (their start-up, torch's import, differs by seconds).
RANK_MAIN = r"""
import os, pickle, sys, time, ringfeed
pattern, outdir, resume, pause = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
with ringfeed.Loader(pattern, %d, size=24, device="cpu", decode_threads=1, seed=13) as ld:
    if resume:
        with open(resume, "rb") as f:
            ld.load_state_dict(pickle.load(f)["state"])
    step = 0
    for b in ld:
        step += 1
        keys = [k for k, pad in zip(b.keys, b.is_padding) if not pad]
        path = os.path.join(outdir, "r%%d-s%%d.pkl" %% (rank, step))
        with open(path + ".tmp", "wb") as f:
            pickle.dump({"keys": keys, "state": ld.state_dict()}, f)
        os.rename(path + ".tmp", path)
        time.sleep(pause)
        # DDP's gradient all-reduce keeps the ranks in step: the next step waits for them all
        while not all(os.path.exists(os.path.join(outdir, "r%%d-s%%d.pkl" %% (r, step)))
                      for r in range(world)):
            time.sleep(0.005)
open(os.path.join(outdir, "r%%d-done" %% rank), "w").close()
""" % BATCH


@pytest.fixture(scope="module")
def big_shards(tmp_path_factory, lib):
    return make_shards(str(tmp_path_factory.mktemp("elastic")), N, 5, 24)


def start_world(pattern, outdir, world, resume="", pause=0.0):
    os.makedirs(outdir, exist_ok=True)
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(world),
                   PYTHONPATH=PACKAGE_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        procs.append(subprocess.Popen(
            [sys.executable, "-c", RANK_MAIN, pattern, outdir, resume, str(pause)], env=env,
            stderr=subprocess.PIPE, text=True))
    return procs


def wait_all(procs, timeout=120):
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err


def steps(outdir, rank):
    return sorted(int(os.path.basename(p).split("-s")[1][:-4])
                  for p in glob.glob(os.path.join(outdir, "r%d-s*.pkl" % rank)))


def keys_of(outdir, rank, upto=None):
    out = []
    for s in steps(outdir, rank):
        if upto is None or s <= upto:
            with open(os.path.join(outdir, "r%d-s%d.pkl" % (rank, s)), "rb") as f:
                out += pickle.load(f)["keys"]
    return out


@pytest.mark.parametrize("world", [3, 8])
def test_rank_union_is_each_sample_once(big_shards, tmp_path, world):
    out = str(tmp_path / "run")
    wait_all(start_world(big_shards, out, world))
    per_rank = [keys_of(out, r) for r in range(world)]
    union = [k for ks in per_rank for k in ks]
    assert len(union) == len(set(union)) == N
    counts = {len(steps(out, r)) for r in range(world)}
    assert len(counts) == 1, "every rank gets the same number of batches: %s" % counts


@pytest.mark.parametrize("old,new", [(8, 4), (4, 8)])
def test_elastic_restart_loses_and_repeats_nothing(big_shards, tmp_path, old, new):
    """Rank 1 is killed (SIGKILL) after its second step, the rest of the group is torn down
    (SIGTERM) as torchrun's elastic agent does, and the job resumes from the last checkpoint
    every rank has written, at another world size: the samples of the steps up to that
    checkpoint and the samples after the resume are the epoch, each once."""
    first = str(tmp_path / "first")
    procs = start_world(big_shards, first, old, pause=0.2)
    deadline = time.time() + 120
    while 2 not in steps(first, 1):
        assert time.time() < deadline and procs[1].poll() is None, "rank 1 never reached step 2"
        time.sleep(0.02)
    procs[1].send_signal(signal.SIGKILL)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(timeout=60)
    last = min(steps(first, r)[-1] if steps(first, r) else 0 for r in range(old))
    assert last >= 1, "no checkpoint every rank wrote"
    before = [k for r in range(old) for k in keys_of(first, r, upto=last)]
    ckpt = os.path.join(first, "r0-s%d.pkl" % last)

    second = str(tmp_path / "second")
    wait_all(start_world(big_shards, second, new, resume=ckpt))
    after = [k for r in range(new) for k in keys_of(second, r)]
    assert len(before) + len(after) == N, (len(before), len(after))
    assert sorted(before + after) == sorted(set(before + after))
    assert len(set(before + after)) == N
