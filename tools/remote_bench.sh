#!/usr/bin/env bash
# remote_bench.sh [IMAGES [ROUNDS]] — CPU-decode throughput of the same shards read from local
# files and over loopback HTTP from nginx (tests/servers/servers.py --only http), in one run:
# ringfeed-bench on the host backend, local and remote alternating for ROUNDS rounds (default
# 3) so that both see the same machine load, over IMAGES (default 2048) ImageNet-like JPEGs
# written by ringfeed-gen with their .idx. Prints each run's img/s and, last, the medians and
# remote / local.
#
# remote_bench.sh --tokens [MIB [ROUNDS]] (or MODE=tokens) — the raw path instead: one token
# file of MIB MiB (default 1024) of random bytes (uint16 tokens, from /dev/urandom), read by
# ringfeed-bench --tokens (--token-bytes 2 --seq-len 1024, random windows, one epoch) from the
# local file and over loopback HTTP, alternating; prints each run's gb_per_s_to_device and
# mb_per_s_read and, last, their medians and remote / local.
#
# docs/remote.md has the figures of this machine. BUILD=dir picks the build tree (build-test);
# extra ringfeed-bench options go in BENCH_OPTS, after the script's own, so they override them
# (the GPU machine: BENCH_OPTS='--device cuda --seq-len 32768 --batch 64 --io-threads 8').
# NGINX=path names the nginx binary when none is on PATH (tests/servers/servers.py). nginx
# serves from every CPU (--nginx-workers auto), as a server would; the tests run one worker.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${MODE:-images}
if [ "${1:-}" = --tokens ]; then
  mode=tokens
  shift
fi
case $mode in
  images) size=${1:-2048} ;;
  tokens) size=${1:-1024} ;;
  *) echo "remote_bench.sh: MODE is images or tokens, not '$mode'" >&2; exit 2 ;;
esac
build=${BUILD:-build-test}
rounds=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/data"
if [ "$mode" = images ]; then
  "$build/datasets/ringfeed-gen" --output "$work/data/train-%06d.tar" --images "$size" \
    --shard-size 32M --quiet
  last=$(ls "$work/data" | grep -c '\.tar$')
  rel="train-{000000..$(printf '%06d' $((last - 1)))}.tar"
else
  dd if=/dev/urandom of="$work/data/tokens.bin" bs=1M count="$size" status=none
  rel=tokens.bin
fi
python3 tests/servers/servers.py --root "$work/data" --state "$work/state" --only http \
  --nginx-workers auto -- \
  bash -euo pipefail -c '
  bench=$1 data=$2 rel=$3 rounds=$4 mode=$5
  # one ringfeed-bench run over $1: its JSON figures named by the mode, space separated
  run() {
    if [ "$mode" = images ]; then
      set -- --shards "$1" --device host --epochs 2 --batch 128
      keys=img_per_s
    else
      set -- --tokens "$1" --token-bytes 2 --seq-len 1024 --device host --epochs 1
      keys="gb_per_s_to_device mb_per_s_read"
    fi
    "$bench" "$@" --json ${BENCH_OPTS:-} 2>/dev/null | tail -1 |
      python3 -c "import json, sys; r = json.load(sys.stdin); print(*(r[k] for k in sys.argv[1:]))" $keys
  }
  show() {
    if [ "$mode" = images ]; then echo "$1 img/s"; else set -- $1; echo "$1 GB/s to device ($2 MB/s read)"; fi
  }
  : > "$data/../local" ; : > "$data/../remote"
  for r in $(seq "$rounds"); do
    l=$(run "$data/$rel")
    h=$(run "$RF_TEST_HTTP/$rel")
    echo "round $r: local $(show "$l"), http $(show "$h")"
    echo "$l" >> "$data/../local"
    echo "$h" >> "$data/../remote"
  done
  python3 - "$data/../local" "$data/../remote" "$mode" <<PY
import statistics, sys
def med(path, i):
    return statistics.median(float(x.split()[i]) for x in open(path))
if sys.argv[3] == "images":
    l, h = med(sys.argv[1], 0), med(sys.argv[2], 0)
    print(f"median: local {l:.0f} img/s, http {h:.0f} img/s, http/local {h / l:.3f}")
else:
    l, h = med(sys.argv[1], 0), med(sys.argv[2], 0)
    lr, hr = med(sys.argv[1], 1), med(sys.argv[2], 1)
    print(f"median: local {l:.3f} GB/s to device ({lr:.0f} MB/s read), http {h:.3f} GB/s "
          f"({hr:.0f} MB/s read), http/local {h / l:.3f}")
PY
' remote_bench "$PWD/$build/tools/ringfeed-bench" "$work/data" "$rel" "$rounds" "$mode"
