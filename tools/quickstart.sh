#!/usr/bin/env bash
# README command one: install what is missing, build, generate the default dataset (4096
# ImageNet-like JPEGs in WebDataset shards under data/), and run the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
if [ ! -f data/train/.complete ]; then
  rm -rf data/train && mkdir -p data/train
  build/datasets/ringfeed-gen --output 'data/train/train-%06d.tar' --images 4096 \
    --classes 1000 --shard-size 64MB --seed 0
  touch data/train/.complete
fi
build/tools/ringfeed-bench --shards 'data/train/train-*.tar' --epochs 2 --batch 256 --warmup 4 "$@"
# stderr, so that --json keeps its JSON as the last line of stdout
echo "Faster: the same images with restart markers (ringfeed-gen --restart, or ringfeed-pack" \
  "--restart for your own data) let crops skip most of each file; see datasets/README.md." >&2
