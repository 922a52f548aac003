#!/usr/bin/env bash
# remote_bench.sh [IMAGES [ROUNDS]] — CPU-decode throughput of the same shards read from local
# files and over loopback HTTP from nginx (tests/servers/servers.py --only http), in one run:
# ringfeed-bench on the host backend, local and remote alternating for ROUNDS rounds (default
# 3) so that both see the same machine load, over IMAGES (default 2048) ImageNet-like JPEGs
# written by ringfeed-gen with their .idx. Prints each run's img/s and, last, the medians and
# remote / local. docs/remote.md has the figures of this machine. BUILD=dir picks the build
# tree (build-test); extra ringfeed-bench options go in BENCH_OPTS.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-test}
images=${1:-2048}
rounds=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/datasets/ringfeed-gen" --output "$work/data/train-%06d.tar" --images "$images" \
  --shard-size 32M --quiet
last=$(ls "$work/data" | grep -c '\.tar$')
last=$(printf '%06d' $((last - 1)))
python3 tests/servers/servers.py --root "$work/data" --state "$work/state" --only http -- \
  bash -euo pipefail -c '
  bench=$1 data=$2 last=$3 rounds=$4
  shift 4
  run() {
    "$bench" --shards "$1" --device host --epochs 2 --batch 128 --json ${BENCH_OPTS:-} 2>/dev/null |
      tail -1 | python3 -c "import json, sys; print(json.load(sys.stdin)[\"img_per_s\"])"
  }
  : > "$data/../local" ; : > "$data/../remote"
  for r in $(seq "$rounds"); do
    l=$(run "$data/train-{000000..$last}.tar")
    h=$(run "$RF_TEST_HTTP/train-{000000..$last}.tar")
    echo "round $r: local $l img/s, http $h img/s"
    echo "$l" >> "$data/../local"
    echo "$h" >> "$data/../remote"
  done
  python3 - "$data/../local" "$data/../remote" <<PY
import statistics, sys
l = statistics.median(float(x) for x in open(sys.argv[1]))
h = statistics.median(float(x) for x in open(sys.argv[2]))
print(f"median: local {l:.0f} img/s, http {h:.0f} img/s, http/local {h / l:.3f}")
PY
' remote_bench "$PWD/$build/tools/ringfeed-bench" "$work/data" "$last" "$rounds"
