#!/usr/bin/env python3
"""Train torchvision ResNet-18/50 (bf16 autocast, channels_last) from ringfeed or, with
--loader torch, from the PyTorch DataLoader reading the same tar shards; print images/s and the
fraction of the time the GPU waited for input.

  python3 train_resnet.py --shards 'data/train/train-*.tar' --arch resnet50 --steps 200
  python3 train_resnet.py --shards 'data/train/train-*.tar' --loader torch --workers 16
  torchrun --nproc_per_node 8 train_resnet.py --shards 'data/train/train-*.tar'

Under torchrun every rank builds its own loader (RANK/WORLD_SIZE from the environment) on
cuda:LOCAL_RANK and the model is wrapped in DistributedDataParallel.

"Waited" is the time the training loop spent blocked on the loader (getting the next batch and,
for the DataLoader, enqueuing its host-to-device copy) divided by the wall time of the measured
steps; each step ends by synchronizing the training stream (as reading loss.item() every step
does), so a blocked loader means an idle GPU. With --fetch-early the next batch is taken
before that synchronization instead of after it, so the loader's time overlaps the step (and
"waited" then only bounds the GPU's idle time from above: the GPU ran the step meanwhile). Not
the whole device: that would also wait for the loader's own streams, where later batches are
being copied and decoded (GPU decode, the hardware JPEG decoders), work a training step never
waits for. One JSON line per run is printed by rank 0.

Its "step" part says, per measured step of rank 0, where the rest went: "next_ms", the time in
next() (the wait above, and what taking a batch costs this thread); "launch_ms", this thread
enqueuing the forward pass, the backward pass and the optimizer step; "gpu_span_ms" and
"gpu_span_p90_ms", the mean and 90th percentile of the step's span on the GPU's own clock (CUDA
events before its first and after its last kernel: the kernels, and the gaps in which the GPU
waited for this thread to launch the next one, which a loader that takes CPU time from it
lengthens); "process_cpu_ms", the user and system time of the whole process (the loader's
threads included), and "cpu_ms_by_thread" the same split by thread role (ringfeed names its
threads: "rf-decode", "rf-io"; io_uring's workers are "iou-wrk"; "main" is this loop's), and
"runq_ms_by_thread" the time those threads were ready to run but waited for a CPU.
"""
import argparse
import glob
import importlib.util
import io
import json
import os
import random
import sys
import tarfile
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package beside examples/, without installing
MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)


def decode_summary(a):
    """Where rank 0's loader decoded its samples, and the scheduler's shares at the end."""
    ld = getattr(a, "ringfeed_loader", None)
    if ld is None:
        return None
    st = ld.stats()
    return {k: st[k] for k in ("decode_schedule", "decode_threads", "samples_decoded",
                               "dct_scaled", "gpu_decoded", "hw_decoded", "sched_gpu_permille",
                               "sched_hw_permille", "hw_engines", "hw_open_ns")}


def ringfeed_batches(a, rank, world, device):
    import ringfeed
    kw = dict(size=a.size, layout="NHWC", device=device, rank=rank, world_size=world,
              seed=a.seed, decode_threads=a.decode_threads, io_threads=a.io_threads,
              prefetch_depth=a.prefetch,
              decode_nice=a.decode_nice, gpu_decode=a.gpu_decode,
              gpu_decode_percent=a.gpu_decode_percent,
              hw_decode_percent=a.hw_decode_percent, schedule=a.schedule,
              dct_scaling={"auto": True, "off": False, "always": "always"}[a.dct_scaling],
              drop_last=True)
    norm = None
    try:  # normalization to bf16 on the GPU by ringfeed itself
        ld = ringfeed.Loader(a.shards, a.batch, dtype="bfloat16", mean=MEAN, std=STD, **kw)
        next(iter(ld))
        ld.set_epoch(0)
    except RuntimeError as e:
        if "does not support that output type" not in str(e):
            raise
        # A libringfeed without the normalization kernel: uint8 batches, normalized here.
        print(f"note: {e}; normalizing in torch", file=sys.stderr)
        ld.close()
        ld = ringfeed.Loader(a.shards, a.batch, dtype="uint8", **kw)
        norm = (torch.tensor(MEAN, device=device).view(1, 3, 1, 1),
                torch.tensor(STD, device=device).view(1, 3, 1, 1))
    a.batches_per_epoch = len(ld)  # equal on every rank: ringfeed pads the partition
    a.ringfeed_loader = ld  # for the decode summary printed at the end
    # From the epoch the loader stands in: 0 here; after ld.load_state_dict(state), the saved
    # epoch, whose set_epoch then continues at the saved batch (python/tests, test_loader.py
    # test_resume_with_the_torchrun_example_loop runs this loop).
    epoch = ld.epoch
    while True:
        ld.set_epoch(epoch)
        for images, labels in ld:
            # NHWC memory seen as an NCHW tensor: exactly channels_last, no copy.
            x = images.permute(0, 3, 1, 2)
            if norm is not None:
                x = ((x.float() - norm[0]) / norm[1]).to(torch.bfloat16)
            yield x, labels
        epoch += 1


def load_anchor(path):
    spec = importlib.util.spec_from_file_location("torch_dataloader_anchor", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.TarShards


class MiniTarShards(torch.utils.data.IterableDataset):
    """Minimal WebDataset reader (KEY.jpg + KEY.cls), used when no --anchor file is given:
    shards split over DataLoader workers, PIL decode, RandomResizedCrop + flip, uint8 CHW."""

    def __init__(self, shards, size, seed=0):
        from torchvision.transforms import v2
        self.shards, self.seed, self.epoch = shards, seed, 0
        self.tf = v2.Compose([v2.RandomResizedCrop(size, antialias=True),
                              v2.RandomHorizontalFlip(), v2.PILToTensor()])

    def __iter__(self):
        from PIL import Image
        info = torch.utils.data.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        order = list(self.shards)
        random.Random(self.seed + self.epoch).shuffle(order)
        self.epoch += 1
        for shard in order[wid::nw]:
            cur = {}
            with tarfile.open(shard, "r|") as tf:
                for m in tf:
                    if not m.isfile():
                        continue
                    key, _, ext = m.name.partition(".")
                    if cur and cur["key"] != key:
                        yield self.emit(cur, Image)
                        cur = {}
                    cur["key"] = key
                    cur[ext] = tf.extractfile(m).read()
            if cur:
                yield self.emit(cur, Image)

    def emit(self, s, Image):
        img = Image.open(io.BytesIO(s["jpg"])).convert("RGB")
        return self.tf(img), int(s.get("cls", b"0"))


def torch_batches(a, rank, world, device):
    shards = sorted(glob.glob(a.shards))[rank::world]  # each rank reads its own shards
    if a.anchor and os.path.exists(a.anchor) and a.size == 224:
        ds = load_anchor(a.anchor)(shards, "pil", seed=a.seed)
    else:
        ds = MiniTarShards(shards, a.size, seed=a.seed)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, num_workers=a.workers,
                                     pin_memory=True, persistent_workers=a.workers > 0,
                                     drop_last=True)
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    while True:
        for x, y in dl:
            x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            y = y.to(device, non_blocking=True)
            yield ((x.float() - mean) / std).to(torch.bfloat16), y


def cpu_by_role():
    """{role: [CPU seconds (user + system), seconds runnable but waiting for a CPU]} of this
    process's live threads, by role: the thread's name without its number (ringfeed's
    "rf-decode-3" and "rf-io-0", io_uring's "iou-wrk-1234"), "main" for this loop's thread;
    threads that ended before the reading are not in it. The wait is the scheduler's
    (/proc/<pid>/task/<tid>/schedstat; 0 where the kernel keeps no schedstats)."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                st = f.read()
        except OSError:  # ended meanwhile
            continue
        name = st[st.index("(") + 1:st.rindex(")")]
        f = st[st.rindex(")") + 2:].split()
        role = "main" if int(tid) == os.getpid() else name.rstrip("0123456789").rstrip("-_")
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f2:
                runq = int(f2.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            runq = 0.0
        o = out.setdefault(role, [0.0, 0.0])
        o[0] += (int(f[11]) + int(f[12])) / tick
        o[1] += runq
    return out


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loader", choices=["ringfeed", "torch", "synthetic"], default="ringfeed",
                    help="synthetic: one batch already on the GPU, reused (the GPU-bound rate)")
    ap.add_argument("--arch", choices=["resnet18", "resnet50"], default="resnet50")
    ap.add_argument("--shards", required=True, help="glob/brace pattern of tar shards")
    ap.add_argument("--batch", type=int, default=256, help="per-rank batch size")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=200, help="measured steps (after warm-up)")
    ap.add_argument("--epochs", type=float, default=None,
                    help="train this many epochs instead of --steps")
    ap.add_argument("--warmup", type=int, default=20, help="unmeasured first steps")
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    # The defaults are docs/tuning.md's training setting: every CPU but one decodes (the one is
    # this loop's), at nice 10. ResNet-18 on the H200 measured 96-97% of its GPU-bound rate so,
    # against 89-91% with every CPU decoding at nice 0 (three interleaved rounds).
    ap.add_argument("--decode-threads", type=int, default=None,
                    help="ringfeed decode threads (default: this rank's share of the CPUs it "
                         "may use, less one; 0: the whole share, "
                         "ringfeed.default_decode_threads())")
    ap.add_argument("--decode-nice", type=int, default=10,
                    help="ringfeed: decode threads this much nicer than the training loop")
    ap.add_argument("--prefetch", type=int, default=4, help="ringfeed prefetch_depth")
    ap.add_argument("--io-threads", type=int, default=0,
                    help="ringfeed io_threads (0: the library's choice)")
    ap.add_argument("--schedule", choices=["auto", "cpu", "manual", "balance"], default="auto",
                    help="ringfeed: where JPEGs are decoded (schedule=; auto: the balancing "
                         "scheduler on a CUDA device, or the manual split with the options "
                         "below; cpu: the CPU only)")
    ap.add_argument("--dct-scaling", choices=["auto", "off", "always"], default="auto",
                    help="ringfeed dct_scaling= (auto: True, the library's default; off: "
                         "False; always: \"always\", crops the CPU scales stay on the CPU)")
    ap.add_argument("--gpu-decode", action="store_true",
                    help="ringfeed: decode baseline JPEGs on the GPU (gpu_decode=True)")
    ap.add_argument("--gpu-decode-percent", type=int, default=100,
                    help="ringfeed with --gpu-decode: percent of images sent to the GPU")
    ap.add_argument("--hw-decode-percent", type=int, default=0,
                    help="ringfeed: percent of images the GPU's hardware JPEG decoders take")
    ap.add_argument("--fetch-early", action="store_true",
                    help="take the next batch after launching a step and before synchronizing, "
                         "not at the top of the next step: the loader's time on this thread then "
                         "overlaps the GPU's work")
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1),
                    help="DataLoader workers (--loader torch)")
    ap.add_argument("--anchor", default=None,
                    help="a torch_dataloader.py whose TarShards --loader torch reuses (docs/gpu.md "
                         "says where it comes from); without it, a minimal reader here")
    a = ap.parse_args()
    if a.decode_threads is None:
        import ringfeed  # the rank's share: affinity, cgroup quota, LOCAL_WORLD_SIZE
        a.decode_threads = max(1, ringfeed.default_decode_threads() - 1)
    return a


def main():
    a = parse_args()
    world = int(os.environ.get("WORLD_SIZE", 1))
    rank = int(os.environ.get("RANK", 0))
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    if world > 1:
        dist.init_process_group("nccl", device_id=device)
    torch.manual_seed(a.seed)
    torch.backends.cudnn.benchmark = True

    model = getattr(torchvision.models, a.arch)(num_classes=a.classes)
    model = model.to(device, memory_format=torch.channels_last)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-5)

    if a.loader == "synthetic":
        def synthetic():
            x = torch.randn(a.batch, 3, a.size, a.size, device=device).contiguous(
                memory_format=torch.channels_last)
            y = torch.randint(0, a.classes, (a.batch,), device=device)
            while True:
                yield x, y
        batches = synthetic()
    else:
        batches = (ringfeed_batches if a.loader == "ringfeed" else torch_batches)(
            a, rank, world, device)
    steps = a.steps
    if a.epochs is not None:  # batches per epoch on this rank, counted by a host loader
        import ringfeed
        with ringfeed.Loader(a.shards, a.batch, device="cpu", world_size=world, rank=rank,
                             decode_threads=1, drop_last=True) as probe:
            steps = max(1, int(a.epochs * len(probe)) - a.warmup)

    waited, t0, images = 0.0, None, 0
    launched, spans, cpu0 = 0.0, [], None
    first, last = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ahead = None  # with --fetch-early: the next step's batch, taken during this one
    for step in range(a.warmup + steps):
        measured = step >= a.warmup
        if step == a.warmup:
            torch.cuda.synchronize()
            waited, images, t0, cpu0 = 0.0, 0, time.perf_counter(), os.times()
            roles0 = cpu_by_role()
        if ahead is None:
            tw = time.perf_counter()
            x, y = next(batches)
            tl = time.perf_counter()
            waited += tl - tw
        else:
            (x, y), ahead, tl = ahead, None, time.perf_counter()
        if measured:
            first.record()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y % a.classes)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if measured:
            last.record()
            launched += time.perf_counter() - tl
        if a.fetch_early and step + 1 < a.warmup + steps:
            # Released now, the batch x is recycled only after the kernels queued above: the
            # release is ordered on this stream (docs/python.md), so no copy is needed.
            tw = time.perf_counter()
            ahead = next(batches)
            waited += time.perf_counter() - tw
        torch.cuda.current_stream().synchronize()
        if measured:  # both events are done: the stream they are on was synchronized
            spans.append(first.elapsed_time(last))
        images += x.shape[0]
    wall = time.perf_counter() - t0
    cpu1 = os.times()
    roles = {k: [v - v0 for v, v0 in zip(vs, roles0.get(k, (0.0, 0.0)))]
             for k, vs in sorted(cpu_by_role().items())}  # per role: [CPU s, runnable s]
    spans.sort()
    step_parts = {
        "next_ms": 1e3 * waited / steps, "launch_ms": 1e3 * launched / steps,
        "gpu_span_ms": sum(spans) / steps, "gpu_span_p90_ms": spans[int(0.9 * (steps - 1))],
        "process_cpu_ms": 1e3 * (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / steps,
        "cpu_ms_by_thread": {k: round(1e3 * d[0] / steps, 2)
                             for k, d in roles.items() if d[0] > 0},
        "runq_ms_by_thread": {k: round(1e3 * d[1] / steps, 2)
                              for k, d in roles.items() if d[1] > 0}}

    stats = torch.tensor([images, wall, waited], dtype=torch.float64, device=device)
    if world > 1:
        dist.all_reduce(stats)
    per_rank = [getattr(a, "batches_per_epoch", None)] * world
    if world > 1:
        dist.all_gather_object(per_rank, getattr(a, "batches_per_epoch", None))
    if rank == 0:
        tot_images, sum_wall, sum_wait = stats.tolist()
        print(json.dumps({
            "loader": a.loader, "arch": a.arch, "world_size": world, "batch_per_rank": a.batch,
            "steps": steps, "fetch_early": a.fetch_early,
            "img_per_s": tot_images / (sum_wall / world),
            "gpu_wait_fraction": sum_wait / sum_wall, "loss": loss.item(),
            "batches_per_epoch_per_rank": per_rank, "decode": decode_summary(a),
            "step": step_parts,
        }), flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
