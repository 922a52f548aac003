#!/usr/bin/env bash
# The libcurl of the binary wheel (tools/wheel.sh): built here for HTTP and HTTPS only, static,
# with nghttp2 (HTTP/2, which src/io/remote.c asks for on https) and OpenSSL linked in, so that
# the wheel bundles what the loader uses and nothing else. Debian's libcurl4 links LDAP, RTMP,
# SSH, Kerberos, GnuTLS, libpsl, libidn2, brotli and zstd too: auditwheel grafted 28 libraries
# for it, 6.6 MiB of the 7.7 MiB wheel; this one adds 2.3 MiB to libringfeed.so.0 (most of it
# OpenSSL's libcrypto), for a wheel of 3.4 MiB.
#
# curl and nghttp2 are Debian's sources at the versions installed (libcurl4-openssl-dev's is the
# libcurl the ctest remote suites run against), with Debian's patches, its security fixes: apt
# fetches and checks them through a private list of deb-src twins of the system's sources.
# curl's series ends with its GnuTLS and NSS flavours, which debian/rules pops for the OpenSSL
# build, and so does this script; the build-system parts of the others concern zsh, Kerberos,
# LDAP and curl's tests, so the tarball's configure serves (no autotools needed), which a patch
# touching lib/'s Makefiles would end (checked). nghttp2 builds with CMake (its tarball has no
# configure), as Debian's libnghttp2.a cannot: it is not position-independent. OpenSSL is
# Debian's libssl.a and libcrypto.a (libssl-dev, tools/deps.sh). The three archives are merged
# into one, because FindCURL's CURL::libcurl holds one file.
#
# Everything lands in build-wheel/curl/VERSIONS/ and is reused while the versions stay. Prints
# `archive: PATH`, `include: DIR` and `components: FILE` (curl, nghttp2 and openssl: what
# tools/wheel_bundle.py needs for the SBOM and the licence texts).
set -euo pipefail
cd "$(dirname "$0")/.."
for p in libcurl4-openssl-dev libnghttp2-14 libssl-dev dpkg-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    { echo "wheel_curl: $p is not installed (tools/deps.sh installs it)" >&2; exit 1; }
done
curl_version=$(dpkg-query -W -f='${source:Version}' libcurl4-openssl-dev)
nghttp2_version=$(dpkg-query -W -f='${source:Version}' libnghttp2-14)
openssl_version=$(dpkg-query -W -f='${Version}' libssl-dev)
dir=$PWD/build-wheel/curl/curl-${curl_version}_nghttp2-${nghttp2_version}
prefix=$dir/prefix
archive=$prefix/lib/libcurl-wheel.a
openssl=()
for a in libssl.a libcrypto.a; do
  path=$(readlink -f "$(gcc -print-file-name="$a")")
  [ -f "$path" ] || { echo "wheel_curl: no $a (libssl-dev, tools/deps.sh)" >&2; exit 1; }
  openssl+=("$path")
done
merge() {
  # Merged on every run, so that an updated libssl-dev is what the wheel links; replaced only
  # when it changed (ar's output is deterministic), so that CMake relinks only then.
  rm -f "$archive.new"
  {
    echo "CREATE $archive.new"
    for a in "$prefix/lib/libcurl.a" "$prefix/lib/libnghttp2.a" "${openssl[@]}"; do
      echo "ADDLIB $a"
    done
    echo "SAVE"
    echo "END"
  } | ar -M
  if cmp -s "$archive.new" "$archive"; then rm "$archive.new"; else mv "$archive.new" "$archive"; fi
  # What went into the archive, for the wheel's SBOM and licence texts: name, Debian version, the
  # archives linked, the copyright file.
  printf '%s\t%s\t%s\t%s\n' \
    curl "$curl_version" "$prefix/lib/libcurl.a" "$dir/curl/debian/copyright" \
    nghttp2 "$nghttp2_version" "$prefix/lib/libnghttp2.a" "$dir/nghttp2/debian/copyright" \
    openssl "$openssl_version" "${openssl[0]} ${openssl[1]}" /usr/share/doc/libssl-dev/copyright \
    >"$dir/components.tsv"
}
report() {
  echo "archive: $archive"
  echo "include: $prefix/include"
  echo "components: $dir/components.tsv"
}
if [ -f "$dir/done" ]; then
  merge
  report
  exit 0
fi
rm -rf "$dir"
mkdir -p "$dir/apt/parts" "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial"
log=$dir/build.log
fail() { tail -n 30 "$log" >&2; echo "wheel_curl: $1 (whole log: $log)" >&2; exit 1; }

# deb-src twins of the system's deb lines, one-line and deb822 formats alike.
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  if [ -f "$f" ]; then sed -n 's/^deb \(.*\)/deb-src \1/p' "$f"; fi
done >"$dir/apt/sources.list"
for f in /etc/apt/sources.list.d/*.sources; do
  if [ -f "$f" ]; then sed 's/^Types:.*/Types: deb-src/' "$f" >"$dir/apt/parts/${f##*/}"; fi
done
apt=(apt-get -q -o Dir::Etc::SourceList="$dir/apt/sources.list"
     -o Dir::Etc::SourceParts="$dir/apt/parts" -o Dir::State::Lists="$dir/apt/lists"
     -o Dir::Cache="$dir/apt/cache" -o APT::Sandbox::User="$(id -un)")
"${apt[@]}" update >"$log" 2>&1 || fail "apt-get update of the deb-src lists failed"
# fetch NAME VERSION: the source, unpacked in $dir/NAME with its series applied but the last
# $3 patches (the tarball is checked against the signed Sources index by apt, and by dpkg-source).
fetch() {
  (cd "$dir" && "${apt[@]}" source --download-only "$1=$2" &&
   dpkg-source -q --skip-patches -x "$1_${2#*:}.dsc" "$1") >>"$log" 2>&1 ||
    fail "could not fetch Debian's source of $1 $2"
  mapfile -t series < <(grep -v '^[[:space:]]*\(#\|$\)' "$dir/$1/debian/patches/series")
  local n=$((${#series[@]} - $3))
  for p in "${series[@]:0:n}"; do
    patch -d "$dir/$1" -p1 -s --no-backup-if-mismatch <"$dir/$1/debian/patches/$p" >>"$log" ||
      fail "$1: $p does not apply"
  done
  printf '%s\n' "${series[@]:n}"
}
skipped=$(fetch curl "$curl_version" 2)
[[ $skipped == *gnutls*nss* ]] ||
  fail "curl's debian/patches/series no longer ends with the GnuTLS and NSS patches: $skipped"
if (cd "$dir/curl" && grep -v '^[[:space:]]*\(#\|$\)' debian/patches/series | head -n -2 |
    sed 's|^|debian/patches/|' | xargs grep -l '^+++ [^/]*/lib/Makefile'); then
  fail "a Debian patch of curl changes lib/'s Makefiles: the tarball's configure is stale"
fi
fetch nghttp2 "$nghttp2_version" 0 >/dev/null

# Debian's hardening flags without -g (debug sections would grow libringfeed.so.0 in the wheel).
cflags=$(dpkg-buildflags --get CFLAGS | sed 's/\(^\| \)-g\( \|$\)/ /')
cppflags=$(dpkg-buildflags --get CPPFLAGS)
jobs=${JOBS:-$(nproc)}
CFLAGS="$cflags $cppflags" cmake -S "$dir/nghttp2" -B "$dir/nghttp2-build" -DENABLE_LIB_ONLY=ON \
  -DENABLE_STATIC_LIB=ON -DENABLE_SHARED_LIB=OFF -DENABLE_DOC=OFF -DENABLE_FAILMALLOC=OFF \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >>"$log" 2>&1 &&
  cmake --build "$dir/nghttp2-build" -j"$jobs" >>"$log" 2>&1 &&
  cmake --install "$dir/nghttp2-build" >>"$log" 2>&1 || fail "nghttp2 did not build"

# Every protocol but HTTP(S) off, and every optional library curl would link but OpenSSL and
# nghttp2; the CA bundle and path are Debian's libcurl's (docs/remote.md: SSL_CERT_FILE).
(cd "$dir/curl" && CFLAGS="$cflags" CPPFLAGS="$cppflags" ./configure --prefix="$prefix" \
  --disable-shared --enable-static --with-pic --disable-dependency-tracking \
  --enable-symbol-hiding --enable-threaded-resolver --disable-manual \
  --enable-http --disable-ftp --disable-file --disable-ldap --disable-ldaps --disable-rtsp \
  --disable-dict --disable-telnet --disable-tftp --disable-pop3 --disable-imap --disable-smb \
  --disable-smtp --disable-gopher --disable-mqtt --disable-websockets --disable-ntlm \
  --disable-ntlm-wb --disable-tls-srp \
  --with-openssl --with-nghttp2="$prefix" --without-zlib --without-brotli --without-zstd \
  --without-libpsl --without-libidn2 --without-librtmp --without-libssh2 --without-libssh \
  --without-gssapi --without-libgsasl --without-hyper \
  --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs) \
  >>"$log" 2>&1 || fail "curl's configure failed"
summary=$(sed -n 's/^ *\(Protocols\|HTTP2\|SSL\): *//p' "$log" | tr '\n' '|')
[[ $summary == "enabled (OpenSSL v3+)|enabled (nghttp2)|HTTP HTTPS|" ]] ||
  fail "curl's configure chose '$summary', not OpenSSL, nghttp2 and HTTP HTTPS only"
make -C "$dir/curl/lib" -j"$jobs" >>"$log" 2>&1 &&
  make -C "$dir/curl/lib" install >>"$log" 2>&1 &&
  make -C "$dir/curl/include" install >>"$log" 2>&1 || fail "curl did not build"
touch "$dir/done"
merge
report
