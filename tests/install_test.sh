#!/usr/bin/env bash
# ctest "install": `cmake --install` of this build tree into a temporary prefix, one component
# at a time, then a C program (tests/consumer/main.c) built against that prefix four ways, as
# users build it: find_package with ringfeed::ringfeed and with ringfeed::ringfeed_static
# (tests/consumer/CMakeLists.txt), and cc with pkg-config, shared and --static. Each reads one
# epoch of a shard made by the build's ringfeed-gen and must count its samples and print the
# library's version; the shared ones must load the prefix's libringfeed (ldd), the static ones
# none. Also: each component installs what cmake/install.cmake says and no rule is left
# without one, every public header is installed as it is in include/, the installed commands
# pass tests/cli_test.sh, and a shared-library consumer configures and runs on a machine
# where pkg-config finds none of the static library's dependencies.
# usage: install_test.sh BUILD SOURCE VERSION LIBDIR INCLUDEDIR BINDIR CC GEN TMP [CFLAGS]
# (CFLAGS: the sanitizer flags of a sanitizer build, for the consumer to link its runtime)
set -uo pipefail
build=$1 src=$2 version=$3 libdir=$4 incdir=$5 bindir=$6 cc=$7 gen=$8
flags=${10:-}
mkdir -p "$9" && tmp=$(mktemp -d "$9/install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH PKG_CONFIG_LIBDIR
export PKG_CONFIG_PATH=
fail=0
bad() { echo "$*"; fail=1; }
prefix=$tmp/prefix
files() { (cd "$1" && find . ! -type d | sed 's|^\./||' | sort | tr '\n' ' '); }

# Components: each into its own prefix (what it holds is checked), then all into one.
expect_runtime="$libdir/libringfeed.so.0 $libdir/libringfeed.so.$version "
expect_tools="$bindir/ringfeed-bench $bindir/ringfeed-gen $bindir/ringfeed-inspect $bindir/ringfeed-pack "
for comp in runtime development tools Unspecified; do
  cmake --install "$build" --prefix "$tmp/$comp" --component "$comp" >/dev/null ||
    bad "cmake --install --component $comp failed"
  mkdir -p "$tmp/$comp"
  got=$(files "$tmp/$comp")
  case $comp in
    runtime) [ "$got" = "$expect_runtime" ] || bad "component runtime installs '$got'";;
    tools) [ "$got" = "$expect_tools" ] || bad "component tools installs '$got'";;
    Unspecified) [ -z "$got" ] || bad "install rules without a COMPONENT: $got";;
  esac
  cmake --install "$build" --prefix "$prefix" --component "$comp" >/dev/null
done
for f in $libdir/libringfeed.so $libdir/libringfeed.a $libdir/pkgconfig/ringfeed.pc \
         $libdir/cmake/ringfeed/ringfeedConfig.cmake \
         $libdir/cmake/ringfeed/ringfeedConfigVersion.cmake \
         $libdir/cmake/ringfeed/ringfeedTargets.cmake; do
  [ -e "$tmp/development/$f" ] || [ -L "$tmp/development/$f" ] || bad "component development lacks $f"
done
for h in "$src"/include/*.h; do
  cmp -s "$h" "$prefix/$incdir/$(basename "$h")" || bad "public header $(basename "$h") not installed"
done
"$src/tests/cli_test.sh" "$version" "$prefix/$bindir"/* || bad "installed commands: cli_test.sh failed"

"$gen" --output "$tmp/shard-%02d.tar" --images 20 --per-shard 20 --max-side 48 --seed 5 --quiet ||
  bad "ringfeed-gen failed"
shard=$tmp/shard-00.tar
run() { # NAME BINARY STATIC(0|1): runs it on the shard, checks its line and what it loads
  local out
  out=$("$2" "$shard" 20) || bad "$1: exit status $? ($out)"
  [ "$out" = "ringfeed $version: 20 samples" ] || bad "$1 printed '$out'"
  local lib
  lib=$(ldd "$2" | awk '/libringfeed/ {print $3}')
  if [ "$3" = 1 ]; then
    [ -z "$lib" ] || bad "$1 (static) loads $lib"
  elif [ "$(readlink -f "$lib")" != "$(readlink -f "$prefix/$libdir/libringfeed.so.0")" ]; then
    bad "$1 loads '$lib', not the prefix's $prefix/$libdir/libringfeed.so.0"
  fi
}

cmake_consumer() { # BUILD_DIR [cmake args...]
  local dir=$1
  shift
  cmake -S "$src/tests/consumer" -B "$dir" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" "$@" >"$dir.log" 2>&1 &&
    cmake --build "$dir" >>"$dir.log" 2>&1
}
if cmake_consumer "$tmp/cm"; then
  run "find_package, ringfeed::ringfeed" "$tmp/cm/consumer_shared" 0
  run "find_package, ringfeed::ringfeed_static" "$tmp/cm/consumer_static" 1
else
  bad "find_package consumer did not build: $(tail -n 30 "$tmp/cm.log")"
fi

export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
read -r -a pc_cflags <<<"$(pkg-config --cflags ringfeed)"
read -r -a pc_libs <<<"$(pkg-config --libs ringfeed)"
read -r -a pc_static <<<"$(pkg-config --static --libs ringfeed)"
# shellcheck disable=SC2086 # $flags: several options
if "$cc" $flags "$src/tests/consumer/main.c" -o "$tmp/pc_shared" "${pc_cflags[@]}" "${pc_libs[@]}" \
     -Wl,-rpath,"$(pkg-config --variable=libdir ringfeed)" 2>"$tmp/pc.log"; then
  run "pkg-config" "$tmp/pc_shared" 0
else
  bad "pkg-config consumer did not link: $(cat "$tmp/pc.log")"
fi
# The archive by name (-Bstatic), then everything --static lists; --as-needed drops the
# shared library that the -lringfeed there would otherwise add.
# shellcheck disable=SC2086
if "$cc" $flags "$src/tests/consumer/main.c" -o "$tmp/pc_static" "${pc_cflags[@]}" -Wl,-Bstatic \
     -lringfeed -Wl,-Bdynamic -Wl,--as-needed "${pc_static[@]}" 2>"$tmp/pc.log"; then
  run "pkg-config --static" "$tmp/pc_static" 1
else
  bad "pkg-config --static consumer did not link: $(cat "$tmp/pc.log")"
fi

# ringfeed::ringfeed needs none of the static library's dependencies: with pkg-config finding
# nothing, find_package(ringfeed) still succeeds, says what the static target lacks, and the
# shared consumer builds and runs.
mkdir -p "$tmp/nopc"
if PKG_CONFIG_LIBDIR=$tmp/nopc PKG_CONFIG_PATH= cmake_consumer "$tmp/cm-shared" -DCONSUMER_STATIC=OFF; then
  grep -q "ringfeed::ringfeed_static needs what was not found: pkg-config module liburing" \
    "$tmp/cm-shared.log" || bad "no line saying what ringfeed_static lacks: $(cat "$tmp/cm-shared.log")"
  run "find_package without the static dependencies" "$tmp/cm-shared/consumer_shared" 0
else
  bad "shared consumer without the static dependencies did not build: $(tail -n 30 "$tmp/cm-shared.log")"
fi
[ $fail -eq 0 ] && echo "install: components, headers, commands and four consumers as documented"
exit $fail
