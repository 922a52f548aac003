#!/usr/bin/env bash
# Run on the GPU machine (see docs/gpu.md): the GPU test suites, then ringfeed-bench side by
# side with the PyTorch DataLoader anchor on the same generated shards, in one command.
#
#   tools/gpu_check.sh BUILD_DIR ANCHOR_DIR [IMAGES]
#
# BUILD_DIR holds a build made with -DRINGFEED_STATIC_DEPS=ON (executables need no liburing /
# libjpeg on that machine) and, in BUILD_DIR/lib, the .so files libringfeed.so needs.
set -uo pipefail
build=${1:?build dir}
anchors=${2:?anchor dir}
images=${3:-20000}
# Everything it writes stays in the checkout (scratch/ is git-ignored) unless OUT says where.
out=${OUT:-$PWD/scratch/gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/$build/lib:${LD_LIBRARY_PATH:-}"
# hw_decode_percent's library, when carried (docs/gpu.md): its tests then must pass
[ -f "$build/lib/libnvjpeg.so.13" ] && export RINGFEED_NVJPEG="$PWD/$build/lib/libnvjpeg.so.13"
nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

echo "== GPU and host test suites"
fail=0
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  RF_TEST_TMP=$PWD/scratch/gpu-tests "$t" >"$out/$(basename "$t").log" 2>&1
  rc=$?
  case $rc in 0) r=passed ;; 77) r=skipped ;; *) r="FAILED ($rc)"; fail=1 ;; esac
  echo "$(basename "$t"): $r  $(grep -E '^[0-9]+%' "$out/$(basename "$t").log" | tail -1)"
done

echo "== dataset: $images ImageNet-like JPEGs, 64 shards"
data=$PWD/scratch/gpu-data
rm -rf "$data" && mkdir -p "$data"
per=$(( (images + 63) / 64 ))
"$build"/datasets/ringfeed-gen --output "$data/train-%06d.tar" --images "$images" \
  --per-shard "$per" --seed 0 --quiet
du -sh "$data"; cat "$data"/*.tar >/dev/null   # page-cache resident

echo "== side by side (same shards, same command)"
"$build"/tools/ringfeed-bench --shards "$data/train-*.tar" --device cuda --batch 256 \
  --epochs 3 --warmup 8 --json | tee "$out/ringfeed.txt" | tail -1 >"$out/ringfeed.json"
tail -22 "$out/ringfeed.txt" | head -20
"$build"/tools/ringfeed-bench --shards "$data/train-*.tar" --device cuda --batch 256 \
  --epochs 1 --warmup 2 --threads 1 --json | tail -1 >"$out/ringfeed_1thread.json"
python3 "$anchors/torch_dataloader.py" --shards "$data/train-*.tar" --workers "$(nproc)" \
  --epochs 2 | tail -1 >"$out/anchor_pil.json"
python3 "$anchors/torch_dataloader.py" --shards "$data/train-*.tar" --workers "$(nproc)" \
  --epochs 2 --decoder torchvision | tail -1 >"$out/anchor_tv.json"
python3 - "$out" <<'PY'
import json, sys, os
d = sys.argv[1]
rf = json.load(open(os.path.join(d, "ringfeed.json")))
one = json.load(open(os.path.join(d, "ringfeed_1thread.json")))
pil = json.load(open(os.path.join(d, "anchor_pil.json")))
tv = json.load(open(os.path.join(d, "anchor_tv.json")))
print(f"{'loader':38s} {'img/s':>10s} {'ratio':>7s}")
for name, v in [("ringfeed (%d threads, to GPU)" % rf["decode_threads"], rf["img_per_s"]),
                ("ringfeed (1 thread, to GPU)", one["img_per_s"]),
                ("DataLoader + PIL (%d workers)" % pil["workers"], pil["img_per_s"]),
                ("DataLoader + torchvision.io (%d workers)" % tv["workers"], tv["img_per_s"])]:
    print(f"{name:38s} {v:10.0f} {rf['img_per_s'] / v:7.2f}")
print("first batch: ringfeed %.1f ms, DataLoader PIL %.0f ms" % (rf["first_batch_ms"], pil["first_batch_s"] * 1e3))
PY
exit $fail
