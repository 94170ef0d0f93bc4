#!/usr/bin/env bash
# Installs the Debian packages rkdeploy needs; idempotent (skips what is present).
#   scripts/setup.sh            build + tests (compiler, CMake, libraries incl. oneDNN, ONNX test
#                               data, python3-torch for the reference models, skimage photos,
#                               Node.js + npm for TensorFlow.js / ONNX Runtime references,
#                               chromium for the HTML report test)
#   scripts/setup.sh --cross    + aarch64 cross toolchain, qemu-user and mmdebstrap (the arm64
#                               libraries come in a sysroot: scripts/arm64-sysroot.sh)
#   scripts/setup.sh --bench    (kept for compatibility: the peers are in the default set now)
#   scripts/setup.sh --fuzz     + clang for the libFuzzer targets
#   scripts/setup.sh --format   + clang-format (make format-check)
# Debian 12 (bookworm), run as root (or with sudo available).
set -euo pipefail

want_cross=0 want_bench=0 want_fuzz=0 want_format=0
for a in "$@"; do
  case "$a" in
    --cross) want_cross=1 ;;
    --bench) want_bench=1 ;;
    --fuzz) want_fuzz=1 ;;
    --format) want_format=1 ;;
    *) echo "setup.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

pkgs=(build-essential cmake ninja-build pkg-config git ca-certificates
      libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev
      libhwy-dev libzip-dev libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
      libdnnl-dev ocl-icd-opencl-dev libstb-dev python3-torch python3-numpy python3-skimage python3-onnx nodejs npm chromium qemu-user
      libflatbuffers-dev flatbuffers-compiler libssl-dev libgemmlowp-dev libxnnpack-dev libpthreadpool-dev file
      python3-dev pybind11-dev python3-pytest)
# libssl-dev: OpenSSL's libcrypto computes the artifact's SHA-256 digest (libzip4 already depends
# on its library package).
# file: CPack's DEB generator reads ELF types with it (make package, the package test).
# libpthreadpool-dev: libxnnpack-dev's header includes pthreadpool.h but the package does not
# depend on it.
# ocl-icd-opencl-dev: Debian's libdnnl-dev only recommends it, but dnnl-config.cmake fails
# without OpenCL's headers and library (and we install with --no-install-recommends).
# ca-certificates: npm (the peers, the real models) reaches its registry over https; nodejs only
# recommends it. qemu-user: qemu-x86_64 runs ONNX Runtime on an emulated CPU without VNNI
# (tests/cli/test_ort_oracle.sh); qemu-aarch64 the arm64 tests (--cross).
[ "$want_cross" = 1 ] && pkgs+=(g++-aarch64-linux-gnu qemu-user mmdebstrap)
[ "$want_fuzz" = 1 ] && pkgs+=(clang libclang-rt-14-dev libomp-14-dev)  # libomp: oneDNN's OpenMP under clang (fuzz_prepare)
[ "$want_format" = 1 ] && pkgs+=(clang-format)


missing=()
for p in "${pkgs[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    # Node.js may come from outside Debian's packages (node + npm on PATH): accept it.
    if { [ "$p" = nodejs ] || [ "$p" = npm ]; } && command -v "${p/nodejs/node}" >/dev/null 2>&1; then continue; fi
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
