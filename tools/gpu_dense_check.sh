#!/bin/bash
# On the GPU machine (docs/gpu.md), one call: the GPU suite on build-gpu, then issue 44's side
# by side on a dense photo set made there: plain shards walked, the same with their sync-point
# index, the same images restart-packed, and the defaults with and without the index. Carry
# build-gpu/{tests/test_cuda,lib,tools/ringfeed-bench,tools/ringfeed-pack} and scratch/photo-tools
# (docs/gpu.md); logs go to $OUT as they are written.
set -u
R=$PWD; B=$R/build-gpu; T=$(mktemp -d)
export LD_LIBRARY_PATH=$B/lib RINGFEED_NVJPEG=$B/lib/libnvjpeg.so.13 PATH=$R/scratch/photo-tools:$PATH
exec > >(tee -a $OUT/suite.log) 2>&1
nvidia-smi -L; nproc; t0=$(date +%s)
echo "== test_cuda"
( cd $B/tests && RF_TEST_TMP=$T CK_DEFAULT_TIMEOUT=150 timeout 150 ./test_cuda > $OUT/test_cuda.log 2>&1; echo "test_cuda rc $?" )
grep -E "^[0-9]+%|:F:|:E:" $OUT/test_cuda.log | tail -25
echo "== dense set ($(( $(date +%s) - t0 )) s)"
D=$T/dense; mkdir -p $D/x $D/r
pids=()  # a bare wait would also wait for the tee above
for j in $(seq 0 15); do
  timeout 60 python3 datasets/photos.py --profile dense --output "$D/d-%06d.tar" --images 160 \
    --per-shard 160 --first $((j * 160)) --seed $j --sources "$R/scratch/photo-tools/*.jpg" > $T/gen$j.log 2>&1 &
  pids+=($!)
done; wait "${pids[@]}"; tail -3 $T/gen0.log
ls $D/*.tar | wc -l; du -sh $D
timeout 30 $B/tools/ringfeed-pack --sync-index $D/d-*.tar --threads 16 --json | tail -1
python3 - "$D" <<'PY'
import glob, os, sys, tarfile
d = sys.argv[1]; lines = []
for p in sorted(glob.glob(d + "/d-*.tar")):
    with tarfile.open(p) as tf:
        m = {x.name: x for x in tf}
        for name, x in m.items():
            if name.endswith(".jpg"):
                out = os.path.join(d, "x", name.replace("/", "_"))
                open(out, "wb").write(tf.extractfile(x).read())
                cls = m.get(name[:-4] + ".cls")
                lab = tf.extractfile(cls).read().decode().strip() if cls else "0"
                lines.append(f"{out} {lab}")
open(d + "/list.txt", "w").write("\n".join(lines) + "\n")
print(len(lines), "images listed")
try:
    from PIL import Image, JpegImagePlugin
    nb = npx = prog = 0; samp = {}
    for ln in lines:
        f = ln.rsplit(" ", 1)[0]; im = Image.open(f)
        nb += os.path.getsize(f); npx += im.size[0] * im.size[1]
        prog += bool(im.info.get("progressive") or im.info.get("progression"))
        k = im.mode if im.mode == "L" else JpegImagePlugin.get_sampling(im); samp[k] = samp.get(k, 0) + 1
    n = len(lines)
    print(f"set: {n} images, {nb / npx:.3f} B/px, {nb / n / 1e3:.0f} KB, {npx / n / 1e3:.0f} kpx mean, progressive {prog}, sampling {samp}")
except Exception as e:
    print("set stats:", e)
PY
timeout 40 $B/tools/ringfeed-pack --list $D/list.txt --output "$D/r/r-%04d.tar" --restart --threads 16 --quiet --json | tail -1
echo "== side by side ($(( $(date +%s) - t0 )) s)"
run() { name=$1; shift
  out=$(timeout 40 $B/tools/ringfeed-bench --device cuda --batch 256 --threads 16 --epochs 12 --warmup 2 --json "$@" 2>$T/err.txt | tail -1)
  echo "RB $name $(echo "$out" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(round(r["img_per_s"]), "img/s; gpu", r["gpu_decoded"], "plain", r.get("gpu_plain_decoded"), "indexed", r["sync_indexed"], "stale", r["sync_stale"], "built", r["sync_built"], "of", r["samples_decoded"], "first_batch_ms", r["first_batch_ms"])' 2>&1 | tail -1) $(tail -1 $T/err.txt)"
}
for round in 1 2; do
  run plain_walk --shards "$D/d-*.tar" --gpu-decode --sync-index off
  run plain_index --shards "$D/d-*.tar" --gpu-decode --sync-index read
  run restart --shards "$D/r/*.tar" --gpu-decode --sync-index off
  run defaults_index --shards "$D/d-*.tar" --sync-index read
  run defaults_walk --shards "$D/d-*.tar" --sync-index off
done
echo "end $(( $(date +%s) - t0 )) s"
