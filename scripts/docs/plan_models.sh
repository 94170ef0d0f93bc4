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
