#!/bin/bash
# The device back end under the rocket test double (tests/npu/fake_rocket, LD_PRELOAD) on a
# transformer: the DEIMv2-S architecture (reduced width), quantized for the default target -
# its patch embedding, linear layers on rows and the element-wise operations between them on the
# NPU - runs through `run --backend device` on 1 and 3 cores with outputs equal to
# `run --backend sim` byte for byte, and `compile` lists the same NPU nodes.
#   test_device_transformer.sh RKDEPLOY FAKE_ROCKET MODELS_DIR
set -euo pipefail
rk="$1"; fake="$2"; models="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
m="$models/deimv2_s_arch_tiny"
/usr/bin/python3 -c "import numpy as np, sys; np.savez(sys.argv[3], images=np.load(sys.argv[1]), orig_target_sizes=np.load(sys.argv[2]))" \
  "$m.input_images.npy" "$m.input_orig_target_sizes.npy" "$work/calib.npz"
"$rk" quantize "$m.onnx" --calib "$work/calib.npz" -o "$work/q.onnx" > /dev/null 2>&1
in=(--input "images=$m.input_images.npy" --input "orig_target_sizes=$m.input_orig_target_sizes.npy")
"$rk" run "$work/q.onnx" --backend sim "${in[@]}" --output-dir "$work/sim" 2> "$work/sim.err" > /dev/null
products=$(sed -n 's/.*; \([0-9]*\) matrix product(s) as 1x1 convolutions.*/\1/p' "$work/sim.err")
[ "${products:-0}" -gt 0 ] || { echo "no matrix product on the NPU: $(grep '^npu:' "$work/sim.err")"; exit 1; }
for cores in 1 3; do
  env LD_PRELOAD="$fake" RKD_FAKE_ROCKET_SEED=1 "$rk" run "$work/q.onnx" --backend device --cores $cores "${in[@]}" \
    --output-dir "$work/dev$cores" 2> "$work/err" > /dev/null || { cat "$work/err"; exit 1; }
  for f in "$work/sim"/*.npy; do cmp "$f" "$work/dev$cores/$(basename "$f")"; done
  echo "deimv2 tiny --cores $cores: $products matrix products on the double, outputs == --backend sim"
done
"$rk" compile "$work/q.onnx" -o "$work/npu" > /dev/null 2>&1
/usr/bin/python3 - "$work/npu/manifest.json" "$products" <<'PY'
import json, sys
m, want = json.load(open(sys.argv[1])), int(sys.argv[2])
got = sum(1 for c in m["convolutions"] if c["directory"].startswith("matmul"))
assert got == want, (got, want)
assert all(c["input"]["host_layout"].startswith("rows") for c in m["convolutions"] if c["directory"].startswith("matmul"))
print(f"compile: {got} matrix products in the manifest")
PY
