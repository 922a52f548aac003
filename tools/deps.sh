#!/usr/bin/env bash
# Install what ringfeed needs to build and test, when it is missing (Debian/Ubuntu, as root or
# with sudo). Safe to run again: it installs nothing that is already there.
set -euo pipefail
# libjpeg-turbo-progs and mate-backgrounds: cjpeg/djpeg and real photographs for the tests'
# photo set (datasets/photos.py), so that decode properties are checked on users' kind of data.
# libspng-dev and libwebp-dev: the PNG and WebP decoders (src/decode/png_decode.c, webp_decode.c).
# python3-venv: tools/wheel.sh and tests/wheel_test.sh make their venvs with it.
pkgs=(build-essential cmake pkg-config liburing-dev libjpeg62-turbo-dev libspng-dev libwebp-dev
      check libsubunit-dev valgrind python3 python3-pip python3-venv python3-pil clang
      libjpeg-turbo-progs mate-backgrounds)
# Ubuntu names libjpeg-turbo's dev package differently.
if ! apt-cache show libjpeg62-turbo-dev >/dev/null 2>&1; then
  pkgs=("${pkgs[@]/libjpeg62-turbo-dev/libjpeg-turbo8-dev}")
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
fi
