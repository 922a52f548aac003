#!/usr/bin/env bash
# ctest "decode_bench": ringfeed-decode-bench --packets --full-scale makes the packets as a
# gpu_decode run does, DCT scaling off, so every crop the kernels take is a packet: on 8
# generated images of 900-1000 px, (b) and (c) each report 8 packets of 8, where without the
# flag the crops the decoder would DCT-scale (5 of these 8) stay CPU decodes.
# usage: decode_bench_test.sh RINGFEED-GEN RINGFEED-DECODE-BENCH TMPDIR
set -euo pipefail
gen=$1 bench=$2 tmp=$3/decode_bench
rm -rf "$tmp" && mkdir -p "$tmp"
"$gen" --output "$tmp/t-%02d.tar" --images 8 --per-shard 8 --min-side 900 --max-side 1000 \
  --seed 5 --quiet --threads 1
fail=0
count() { grep -E "^\($1\)" | sed -E 's/.*packets ([0-9]+) of ([0-9]+).*/\1 \2/'; }
out=$("$bench" --packets --reps 1 "$tmp/t-00.tar")
full=$("$bench" --packets --full-scale --reps 1 "$tmp/t-00.tar")
for m in b c d; do
  read -r n total <<<"$(count $m <<<"$full")"
  [ "$n" = 8 ] && [ "$total" = 8 ] ||
    { echo "--full-scale ($m): $n packets of $total, expected 8 of 8"; fail=1; }
  read -r n total <<<"$(count $m <<<"$out")"
  [ "$n" -lt 8 ] ||
    { echo "default ($m): $n packets of $total: no crop was left to DCT scaling"; fail=1; }
done
rm -rf "$tmp"
[ $fail -eq 0 ] && echo "decode_bench: --full-scale makes every crop a packet (8 of 8)"
exit $fail
