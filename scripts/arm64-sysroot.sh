#!/usr/bin/env bash
# Makes the arm64 Debian 12 sysroot the whole toolkit cross-builds against
# (cmake/aarch64-sysroot.cmake): the :arm64 -dev packages rkdeploy links, and Python 3 with
# NumPy and pybind11 (the Python package's modules, and the interpreter its arm64 test runs under
# qemu), extracted by mmdebstrap (--variant=extract: no maintainer scripts, so no emulation;
# about 30 s and 280 MB). Idempotent: a sysroot whose package list matches is kept.
# Usage: bash scripts/arm64-sysroot.sh DIR
set -euo pipefail
dir=${1:?usage: arm64-sysroot.sh DIR}
pkgs=libstdc++-12-dev,libc6-dev,libdnnl-dev,ocl-icd-opencl-dev,libprotobuf-dev,libonnx-dev,libflatbuffers-dev,libfmt-dev,libstb-dev,libgtest-dev,libgmock-dev,libhwy-dev,libzip-dev,libssl-dev,nlohmann-json3-dev,libcli11-dev,libxnnpack-dev,libpthreadpool-dev,libpython3.11-dev,python3.11,python3-numpy,pybind11-dev
if [ -f "$dir/.rkdeploy-packages" ] && [ "$(cat "$dir/.rkdeploy-packages")" = "$pkgs" ]; then
  echo "arm64-sysroot: $dir is up to date"
  exit 0
fi
tmp="$dir.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
mmdebstrap --quiet --variant=extract --architectures=arm64 --include="$pkgs" bookworm "$tmp"
echo "$pkgs" > "$tmp/.rkdeploy-packages"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "arm64-sysroot: $dir ($(du -sh "$dir" | cut -f1))"
