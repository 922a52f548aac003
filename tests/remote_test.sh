#!/bin/sh
# remote_test.sh TEST_REMOTE SERVERS_PY — ctest `remote`: write the suite's data (shards of
# the generator, GNU tar, Python tarfile, webdataset, photos: `test_remote --make-data`), then
# run test_remote under tests/servers/servers.py (nginx HTTP and HTTPS, moto S3 with the data
# uploaded, the fault proxy), which exits 77 (ctest's skip) naming what is missing.
set -e
bin=$1
servers=$2
tmp=${RF_TEST_TMP:-/tmp}
mkdir -p "$tmp"
work=$(mktemp -d "$tmp/remote.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
"$bin" --make-data "$work/data"
python3 "$servers" --root "$work/data" --state "$work/state" --s3-upload -- "$bin" "$work/data"
