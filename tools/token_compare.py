#!/usr/bin/env python3
"""Token windows into GPU memory: ringfeed against the nanoGPT-style loop, side by side.

The baseline is nanoGPT's get_batch(): np.memmap of the token file, random starts,
torch.stack of int64 windows, pin_memory(), .to(device, non_blocking=True). ringfeed reads the
uint16 windows straight into its pinned ring and widens to int64 on the GPU.

  python3 tools/token_compare.py --bench build/tools/ringfeed-bench --tokens data/tok.bin \
      --batch 64 --seq-len 1024 --batches 2000

Prints one table and, last, one JSON line with both figures and the ratio."""
import argparse, json, subprocess, time

import numpy as np
import torch


def nanogpt(path, batch, L, batches, device):
    data = np.memmap(path, dtype=np.uint16, mode="r")
    def get_batch():
        ix = torch.randint(len(data) - L - 1, (batch,))
        x = torch.stack([torch.from_numpy(data[i:i + L].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + L].astype(np.int64)) for i in ix])
        return (x.pin_memory().to(device, non_blocking=True),
                y.pin_memory().to(device, non_blocking=True))
    for _ in range(20):
        get_batch()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(batches):
        x, y = get_batch()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    # bytes that reach the GPU: x and y as int64
    return {"batches_per_s": batches / dt, "gb_per_s": batches * 2 * batch * L * 8 / dt / 1e9}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=2000)
    a = ap.parse_args()
    base = nanogpt(a.tokens, a.batch, a.seq_len, a.batches, "cuda")
    out = subprocess.run([a.bench, "--tokens", a.tokens, "--token-bytes", "2", "--seq-len",
                          str(a.seq_len), "--batch", str(a.batch), "--token-dtype", "int64",
                          "--device", "cuda", "--epochs", "1", "--warmup", "20", "--json"],
                         check=True, capture_output=True, text=True).stdout
    rf = json.loads(out.strip().splitlines()[-1])
    # ringfeed delivers one (L+1)-token row per window: x and y are views of it
    rows = {"ringfeed": (rf["batches_per_s"], rf["gb_per_s_to_device"]),
            "nanoGPT memmap+stack+pin": (base["batches_per_s"], base["gb_per_s"])}
    print(f"{'loader':28s} {'batches/s':>10s} {'GB/s to GPU':>12s}")
    for k, (b, g) in rows.items():
        print(f"{k:28s} {b:10.1f} {g:12.2f}")
    print(json.dumps({"ringfeed_batches_per_s": rf["batches_per_s"],
                      "ringfeed_gb_per_s": rf["gb_per_s_to_device"],
                      "nanogpt_batches_per_s": base["batches_per_s"],
                      "nanogpt_gb_per_s": base["gb_per_s"],
                      "ratio": rf["batches_per_s"] / base["batches_per_s"]}))


if __name__ == "__main__":
    main()
