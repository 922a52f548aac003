#!/usr/bin/env bash
# Install what ringfeed needs to build and test, when it is missing (Debian/Ubuntu, as root or
# with sudo). Safe to run again: it installs nothing that is already there.
set -euo pipefail
# libjpeg-turbo-progs and mate-backgrounds: cjpeg/djpeg and real photographs for the tests'
# photo set (datasets/photos.py), so that decode properties are checked on users' kind of data.
# libspng-dev and libwebp-dev: the PNG and WebP decoders (src/decode/png_decode.c, webp_decode.c).
# python3-venv: tools/wheel.sh and tests/wheel_test.sh make their venvs with it.
# nginx-light, openssl, curl: the real HTTP(S) servers, their certificate and a client for the
# remote-shard tests (tests/servers/servers.py); libcurl4-openssl-dev: the remote I/O engine.
# libssl-dev and dpkg-dev: OpenSSL's static archives and dpkg-source, with which
# tools/wheel_curl.sh builds the binary wheel's libcurl (from Debian's source, fetched by apt).
pkgs=(build-essential cmake pkg-config liburing-dev libjpeg62-turbo-dev libspng-dev libwebp-dev
      check libsubunit-dev valgrind python3 python3-pip python3-venv python3-pil clang
      libjpeg-turbo-progs mate-backgrounds nginx-light openssl curl libcurl4-openssl-dev
      libssl-dev dpkg-dev)
# Ubuntu names libjpeg-turbo's dev package differently.
if ! apt-cache show libjpeg62-turbo-dev >/dev/null 2>&1; then
  pkgs=("${pkgs[@]/libjpeg62-turbo-dev/libjpeg-turbo8-dev}")
fi
# Releases after Debian 12 fold nginx-light into nginx; either has SSL and HTTP/2.
if ! apt-cache show nginx-light >/dev/null 2>&1 || dpkg-query -W -f='${Status}' nginx 2>/dev/null |
    grep -q "install ok installed"; then
  pkgs=("${pkgs[@]/nginx-light/nginx}")
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  # The package starts a system nginx on port 80; the tests run their own, unprivileged, so the
  # system one is stopped again where this script installed it.
  if [[ " ${missing[*]} " == *" nginx"* ]] && command -v systemctl >/dev/null; then
    $sudo systemctl disable --now nginx >/dev/null 2>&1 || true
  fi
fi
# moto's S3 server and boto3 (PyPI only; servers.py runs moto with IAM authentication, which
# its 5.2.1 was checked with) and pytest for tests/servers/test_servers.py, for the user who
# runs the tests. Debian 12's pip refuses to install into the system Python (PEP 668), so a
# refusal is followed by --user --break-system-packages, which leaves Debian's files alone.
if ! python3 -c 'import moto.server, boto3, pytest' 2>/dev/null; then
  py=(python3 -m pip install -q 'moto[server]==5.2.1' boto3 pytest)
  "${py[@]}" 2>/dev/null || "${py[@]}" --user --break-system-packages
fi
# webdataset (PyPI): its TarWriter writes some of the shards ctest remote and the Python tests
# read, as users write theirs (tests/remote_users.py, python/tests/conftest.py); numpy (which
# the Python binding needs, and webdataset pulls in) writes ctest remote_tokens' token files
# as nanoGPT writes train.bin.
if ! python3 -c 'import webdataset, numpy' 2>/dev/null; then
  py=(python3 -m pip install -q webdataset numpy)
  "${py[@]}" 2>/dev/null || "${py[@]}" --user --break-system-packages
fi
