#!/bin/bash
# ort_oracle.sh's detection against a peer known to be inexact: ONNX Runtime run on an emulated
# AMD Zen 3 (qemu-x86_64 -cpu EPYC-Milan: AVX2, no VNNI, whatever this host has), where its
# u8 x s8 convolution kernels sum product pairs in saturating int16:
#   test_ort_oracle.sh RKDEPLOY
# Checks: int8 models found inexact (the saturation probe fails), uint8 ones exact (their
# kernels do not saturate), and rkdeploy exact on every convolution (it runs natively).
set -euo pipefail
rkd="$1"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
command -v qemu-x86_64 > /dev/null || { echo "test_ort_oracle: qemu-x86_64 missing (scripts/setup.sh installs qemu-user)"; exit 1; }
# qemu warns once per CPU feature its TCG does not emulate (x2apic, rtm, ...): none of them
# is an instruction ONNX Runtime's kernels use.
ORT_WRAP="qemu-x86_64 -cpu EPYC-Milan" bash "$here/tests/cli/ort_oracle.sh" "$rkd" "$work/ops" > "$work/verdict"
cat "$work/verdict"
grep -qx "int8 inexact" "$work/verdict" || { echo "test_ort_oracle: ONNX Runtime without VNNI was not found inexact for int8"; exit 1; }
grep -qx "uint8 exact" "$work/verdict" || { echo "test_ort_oracle: ONNX Runtime without VNNI was expected exact for uint8"; exit 1; }
echo "test_ort_oracle: the detection holds"
