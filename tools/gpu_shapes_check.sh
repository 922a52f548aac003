#!/bin/bash
# On the GPU machine (docs/gpu.md), one call: the GPU suite on build-gpu, then issue 46's output
# shapes side by side on a dense photo set with targets made there (datasets/photos.py --profile
# dense --targets): letterbox, center_pad, native, multi-crop views and size buckets, each on the
# CPU schedule, the kernels (gpu_decode), the engines (hw_decode_percent 100) and the defaults,
# and with masks and boxes; docs/performance.md's "Output shapes on the GPU paths" section.
# Carry build-gpu/{tests/test_cuda,lib,tools/ringfeed-bench} and scratch/photo-tools (docs/gpu.md:
# the source photographs and cjpeg); SKIP_SUITE=1 runs the figures alone. Logs go to $OUT.
set -u
R=$PWD; B=$R/build-gpu; T=$(mktemp -d)
export LD_LIBRARY_PATH=$B/lib RINGFEED_NVJPEG=$B/lib/libnvjpeg.so.13 PATH=$R/scratch/photo-tools:$PATH
exec > >(tee -a $OUT/shapes.log) 2>&1
nvidia-smi -L; nproc; t0=$(date +%s)
echo "== test_cuda"
[ -n "${SKIP_SUITE:-}" ] || ( cd $B/tests && RF_TEST_TMP=$T CK_DEFAULT_TIMEOUT=200 timeout 240 ./test_cuda > $OUT/test_cuda.log 2>&1; echo "test_cuda rc $?" )
grep -E "^[0-9]+%|:F:|:E:" $OUT/test_cuda.log | tail -25
D=${DENSE:-} # a set made by an earlier call on the same warm machine
if [ -z "$D" ] || [ "$(ls $D/*.tar 2>/dev/null | wc -l)" != 16 ]; then
echo "== dense set ($(( $(date +%s) - t0 )) s)"
D=$T/dense; mkdir -p $D
pids=()
for j in $(seq 0 15); do
  timeout 120 python3 datasets/photos.py --profile dense --targets --output "$D/d-%06d.tar" --images 100 \
    --per-shard 100 --first $((j * 100)) --seed $j --sources "$R/scratch/photo-tools/*.jpg" > $T/gen$j.log 2>&1 &
  pids+=($!)
done; wait "${pids[@]}"
fi
echo "DENSE=$D"; ls $D/*.tar | wc -l; du -sh $D
python3 - "$D" <<'PY'
import glob, io, sys, tarfile
from PIL import Image, JpegImagePlugin
nb = npx = prog = n = 0; samp = {}; mb = 0
for p in sorted(glob.glob(sys.argv[1] + "/d-*.tar")):
    with tarfile.open(p) as tf:
        for x in tf:
            b = tf.extractfile(x).read() if x.isfile() else b""
            if x.name.endswith(".jpg"):
                im = Image.open(io.BytesIO(b)); n += 1; nb += len(b); npx += im.size[0] * im.size[1]
                prog += bool(im.info.get("progressive") or im.info.get("progression"))
                k = im.mode if im.mode == "L" else JpegImagePlugin.get_sampling(im); samp[k] = samp.get(k, 0) + 1
            elif x.name.endswith(".seg.png"):
                mb += len(b)
print(f"set: {n} images, {nb / npx:.3f} B/px, {nb / n / 1e3:.0f} KB, {npx / n / 1e3:.0f} kpx mean, progressive {prog}, sampling {samp}, masks {mb / n / 1e3:.1f} KB mean")
PY
echo "== runs ($(( $(date +%s) - t0 )) s)"
run() { name=$1; shift
  timeout 25 $B/tools/ringfeed-bench --device cuda --batch 128 --threads 16 --epochs 3 --warmup 1 --json "$@" 2>$T/err.txt | tail -1 > $T/$name.json
  python3 - $T/$name.json "$name" <<'PY'
import json, sys
try: r = json.loads(open(sys.argv[1]).read())
except Exception as e: print("RB", sys.argv[2], "no json", e); sys.exit()
ep = [round(e["img_per_s"]) for e in r.get("per_epoch", [])]
print("RB", sys.argv[2], round(r["img_per_s"]), "img/s; gpu", r["gpu_decoded"], "hw", r["hw_decoded"], "of", r["samples_decoded"],
      "shares", r.get("sched_gpu_permille"), r.get("sched_hw_permille"), "skipped", r.get("skipped"), "epochs", ep)
PY
  tail -1 $T/err.txt
}
S="--shards $D/d-*.tar"; set -f
M="--mask seg.png"; X="--box-json-path boxes --box-class-json-path classes --max-boxes 32"
for round in 1 2; do
  for crop in "letterbox --size 640" "center_pad --size 224" "native --size 640"; do
    c=$(echo $crop | cut -d' ' -f1)
    run ${c}_cpu_$round $S --crop $crop --schedule cpu
    run ${c}_kernels_$round $S --crop $crop --gpu-decode
    run ${c}_engines_$round $S --crop $crop --schedule manual --hw-decode-percent 100
    run ${c}_defaults_$round $S --crop $crop
  done
  V="--multi-crop 2x224:0.4-1,6x96:0.05-0.4"
  run views_cpu_$round $S $V --schedule cpu
  run views_kernels_$round $S $V --gpu-decode
  run views_engines_$round $S $V --schedule manual --hw-decode-percent 100
  run views_defaults_$round $S $V
  run views_kernels_targets_$round $S $V --gpu-decode $M $X
  run views_cpu_targets_$round $S $V --schedule cpu $M $X
  run letterbox_kernels_targets_$round $S --crop letterbox --size 640 --gpu-decode $M $X
  run letterbox_cpu_targets_$round $S --crop letterbox --size 640 --schedule cpu $M $X
  run random_kernels_$round $S --gpu-decode
  B3="--crop letterbox --size-buckets 384x640,512x512,640x384"
  run buckets_cpu_$round $S $B3 --schedule cpu
  run buckets_kernels_$round $S $B3 --gpu-decode
  run buckets_engines_$round $S $B3 --schedule manual --hw-decode-percent 100
  run buckets_defaults_$round $S $B3
done
echo "end $(( $(date +%s) - t0 )) s"
