#!/bin/bash
# YOLOv8n's architecture (the 320 x 320 test build) quantized uint8 per tensor, simulated with
# its SiLUs through the DPU's lookup table: qdq-to-qlinear folds each x * Sigmoid(x) into one
# table of x (mul_lut_sites), the runtime runs 55 of them as LUT tasks (two follow convolutions
# the quantizer keeps float: quantize warns about the Concats they read) and the head's division
# on [1, 2, 2100] rows as a 56th, and every output of
# `run --backend sim` equals `--backend int8`'s (the reference's tables) byte for byte. Its
# two nearest x2 Resizes (the neck's upsampling) run as DPU copy tasks. `compile` lists the
# same tables as Lut entries, the Resizes as Resize entries with their scratch map, and no
# SiLU Mul or Resize among the CPU's nodes.
#   test_npu_yolo.sh RKDEPLOY MODELS_DIR
set -euo pipefail
rk="$1"; m="$2/yolov8n_arch_tiny"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -c "import numpy as np, sys; np.savez(sys.argv[2], images=np.load(sys.argv[1]))" "$m.input_images.npy" "$work/calib.npz"
"$rk" quantize "$m.onnx" --calib "$work/calib.npz" --dtype uint8 --target none -o "$work/q.onnx" > /dev/null 2> "$work/q.err"
in="images=$m.input_images.npy"
"$rk" run "$work/q.onnx" --backend int8 --requant rknpu_out_cvt --input "$in" --output-dir "$work/int8" > /dev/null
"$rk" run "$work/q.onnx" --backend sim --strategy per-tensor --requant rknpu_out_cvt --input "$in" --output-dir "$work/sim" > /dev/null 2> "$work/sim.log"
grep -q "; 56 other table(s) through the DPU's LUT, 1 on the CPU;" "$work/sim.log" || { cat "$work/sim.log"; exit 1; }
# The one left: the head's Sigmoid on [1, 80, 2100] rows, between the DFL convolution (width
# 2100, past the 11-bit width field) and the CPU's post-processing.
grep -q "on the CPU: /detect/Sigmoid/lut: its producer and every reader run on the CPU" "$work/sim.log"
grep -q "; 2 nearest x2 Resize(s) as NPU tasks (0 edge-padded for a bilinear one), 0 on the CPU" "$work/sim.log" || { cat "$work/sim.log"; exit 1; }
for f in "$work"/int8/*.npy; do cmp "$f" "$work/sim/$(basename "$f")"; done
echo "yolov8n tiny uint8: every output of the simulated run (55 SiLU tables and a division on the LUT) equals the int8 reference's"
"$rk" compile "$work/q.onnx" --strategy per-tensor -o "$work/c" > /dev/null
/usr/bin/python3 - "$work/c/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
lut = [e for e in m["elementwise"] if e["op"] == "Lut"]
assert len(lut) == 56 and all(len(e["table"]) == 256 and len(e["tasks"]) == 1 for e in lut), len(lut)
muls = [x for x in m["cpu"] if x["op"] == "Mul"]
# The neck's two Concats whose narrow branch one scale would collapse (random weights: ranges
# of 1e-5 beside 1e-3) stay float with their readers: the SiLUs feeding them (b0.4, b1.1) and
# the SiLUs of the convolutions reading them (h1/cv1, h2/cv1) compute in float; so does the
# SiLU of a bottleneck branch whose residual Add one scale would collapse (b2.1/m.0: 13 levels).
float_silus = ("/b0/b0.4/cv2/", "/b1/b1.1/cv2/", "/h1/cv1/", "/h2/cv1/", "/b2/b2.1/m.0/cv2/")
assert not [x for x in muls if "/act/" in x["node"] and not x["node"].startswith(float_silus)], muls
up = [e for e in m["elementwise"] if e["op"] == "Resize"]
assert len(up) == 2 and not [x for x in m["cpu"] if x["op"] == "Resize"], (up, m["cpu"])
for e in up:
    g = e["geometry"]
    assert g["OH"] == 2 * g["H"] and g["OW"] == 2 * g["W"] and e["scratch"] and all(s["bytes"] > 0 for s in e["scratch"]), e
    # The columns (512 cells per task, twice) then the lines (512 per task, twice).
    blocks = (g["C"] + 15) // 16
    want = 2 * (-(-blocks * g["H"] * g["W"] // 512) + -(-blocks * g["H"] // 512))
    assert len(e["tasks"]) == want, (len(e["tasks"]), want)
print(f"yolov8n tiny uint8 compile: {len(lut)} Lut entries, {len(up)} Resize entries, {len(muls)} Mul(s) on the CPU")
PY
