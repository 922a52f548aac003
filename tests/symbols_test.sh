#!/usr/bin/env bash
# ctest "symbols": the shared library's dynamic symbol table is exactly the public API.
# Every defined dynamic symbol must be a function or object declared RF_API in the public
# headers (so nothing internal, and nothing from the static CUDA runtime linked inside, is
# exported), every RF_API declaration must be exported (a missing one is a link error for
# users, not for our tests, which link the static library), and the SONAME must stay
# libringfeed.so.0.
# usage: symbols_test.sh LIBRINGFEED.so INCLUDE_DIR
set -euo pipefail
lib=$1 inc=$2
fail=0
# RF_API declarations: the function name is the last identifier before the first '('.
declared=$(grep -h '^RF_API ' "$inc"/ringfeed.h "$inc"/ringfeed_shards.h | grep -o '^RF_API [^(;]*(' |
           sed -E 's/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)\($/\1/' | sort -u)
[ -n "$declared" ] || { echo "no RF_API declarations found under $inc"; exit 1; }
# Defined dynamic symbols; the version node (type A, e.g. RINGFEED_0) is not a symbol of ours.
exported=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort -u)
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
if [ -n "$extra" ]; then
  echo "exported but not declared RF_API in $inc:"; echo "$extra" | sed 's/^/  /'; fail=1
fi
if [ -n "$missing" ]; then
  echo "declared RF_API but not exported by $lib:"; echo "$missing" | sed 's/^/  /'; fail=1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libringfeed.so.0" ]; then
  echo "SONAME is '$soname', expected libringfeed.so.0"; fail=1
fi
[ $fail -eq 0 ] && echo "symbols: $(echo "$exported" | wc -l) exported, all declared RF_API; SONAME $soname"
exit $fail
