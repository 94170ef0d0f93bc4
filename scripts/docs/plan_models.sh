#!/usr/bin/env bash
# The planner's figures in docs/deployment-guide.md: DEIMv2-S (architecture model, 640x640)
# on every profile, calibrated on the published RK3576 figure, and YOLOv8n on rk3588-rkdeploy.
# Usage: bash scripts/docs/plan_models.sh RKDEPLOY MODELS_DIR OUT_DIR
#   (MODELS_DIR from scripts/models/make_models.py: make models)
set -euo pipefail
rkd="$1"; models="$2"; out="$3"
mkdir -p "$out"
photo=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
deim=("$models/deimv2_s_arch.onnx" --discrete-model "$models/deimv2_s_arch_discrete.onnx" --image "$photo" --runs 5)
"$rkd" plan "${deim[@]}" --target rk3576-rknn-2.3.2 --calibrate targets/measurements/deimv2-s-rk3576-rknn-2.3.2.json \
  --markdown "$out/deimv2-rk3576-rknn-2.3.2.md" --html "$out/deimv2-rk3576-rknn-2.3.2.html" --json > "$out/deimv2-rk3576-rknn-2.3.2.json"
"$rkd" plan "${deim[@]}" --target rk3576-rknn-2.3.2 --calibrate targets/measurements/deimv2-s-rk3576-rknn-2.3.2.json > "$out/deimv2-rk3576-rknn-2.3.2.txt"
for t in rk3576-rknn-2.4 rk3588-rknn-2.3.2 rk3588-mesa-rocket rk3588-rkdeploy; do
  "$rkd" plan "${deim[@]}" --target "$t" > "$out/deimv2-$t.txt"
done
for t in rk3588-rkdeploy rk3588-rknn-2.3.2 rk3588-mesa-rocket; do
  "$rkd" plan "$models/yolov8n_arch.onnx" --variant as-is --image "$photo" --runs 5 --target "$t" > "$out/yolov8n-$t.txt"
done
# YOLOv8n quantized (percentile, on a few of skimage's photos) as rkdeploy's runtime runs it.
calib="$out/calib"; mkdir -p "$calib"
for p in astronaut camera chelsea coffee motorcycle_left; do cp "$(dirname "$photo")/$p.png" "$calib/"; done
"$rkd" quantize "$models/yolov8n_arch.onnx" --calib "$calib" --method percentile -o "$out/yolov8n.qdq.onnx" > /dev/null 2>&1
"$rkd" plan "$out/yolov8n.qdq.onnx" --variant as-run --image "$photo" --runs 5 --target rk3588-rkdeploy > "$out/yolov8n-rk3588-rkdeploy-as-run.txt"
# DEIMv2-S quantized for rkdeploy's NPU (the default target, the same photos) as its runtime runs
# it: the planner's as-run variant, the NPU's share of the MACs from compile's manifest, and the
# detections against the float model's (eval, 20 views of build/eval when it exists).
for m in deimv2_s_arch deimv2_s_arch_discrete; do
  "$rkd" quantize "$models/$m.onnx" --calib "$calib" --method percentile -o "$out/$m.qdq.onnx" > /dev/null 2>&1
  "$rkd" plan "$out/$m.qdq.onnx" --variant as-run --image "$photo" --runs 5 --target rk3588-rkdeploy > "$out/$m-rk3588-rkdeploy-as-run.txt"
  rm -rf "$out/$m.rk3588"
  "$rkd" compile "$out/$m.qdq.onnx" -o "$out/$m.rk3588" > "$out/$m-compile.txt" 2>&1
  "$rkd" inspect "$models/$m.onnx" --json > "$out/$m-inspect.json"
  /usr/bin/python3 - "$out/$m.rk3588/manifest.json" "$out/$m-inspect.json" > "$out/$m-npu-macs.txt" <<'PY'
import json, sys
m, i = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
npu = sum((1 if g["depthwise"] else g["C"]) * g["OC"] * g["KH"] * g["KW"] * g["OH"] * g["OW"] for g in (c["geometry"] for c in m["convolutions"]))
total = i["total_macs"]
print(f"NPU {npu / 1e9:.2f} GMAC of {total / 1e9:.2f} ({100 * npu / total:.1f} %)")
PY
  if [ -d "$models/../eval" ]; then
    "$rkd" eval "$out/$m.qdq.onnx" --images "$models/../eval" --reference "$models/$m.onnx" --backend int8 --max-images 20 > "$out/$m-eval.txt" 2>&1
  fi
done
