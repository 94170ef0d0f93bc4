#!/usr/bin/env bash
# Two builds of rkdeploy on the same files, interleaved, for a change that must not slow
# anything: the reference models at 640x640 on the CPU executor (bench/run_models.sh's set)
# and the five TensorFlow.js detectors quantized (bench/run_int8.sh's set) on --backend int8
# and --backend sim, 1 and 2 threads. Each round runs every case with both builds back to
# back, the order swapped every round so that a shared machine's drift hits both.
# Usage: [ROUNDS=N] bash bench/run_before_after.sh OLD_BUILD NEW_BUILD [RUNS] > results.jsonl
#        python3 bench/summarize_before_after.py results.jsonl
# Needs `make models` and the human_models fixture (make test) in NEW_BUILD; the models are
# quantized once, by NEW_BUILD's rkdeploy, and both builds run those files.
set -euo pipefail
source "$(dirname "$0")/int8_models.sh"
OLD=$1
NEW=$2
RUNS=${3:-5}
ROUNDS=${ROUNDS:-3}
H=$NEW/human
cases=()
for m in yolov8n_arch deimv2_s_arch deimv2_s_arch_discrete; do
  f=$NEW/models/$m.onnx
  [ -f "$f" ] || { echo "missing $f: run make models" >&2; exit 1; }
  ins=""
  for i in "$NEW"/models/$m.input_*.npy; do n=${i##*.input_}; ins+=" --input ${n%.npy}=$i"; done
  cases+=("$m cpu $f$ins")
done
while read -r name input q; do
  for b in int8 sim; do cases+=("$name $b $q --input $input=$H/inputs/$name.input.npy"); done
done <<< "$(int8_models "$NEW/src/cli/rkdeploy" "$NEW")"
for round in $(seq "$ROUNDS"); do
  order="before after"
  [ $((round % 2)) -eq 0 ] && order="after before"
  for c in "${cases[@]}"; do
    read -r model backend args <<< "$c"
    for t in 1 2; do
      for who in $order; do
        b=$OLD
        [ "$who" = after ] && b=$NEW
        # shellcheck disable=SC2086  # args: the file and its --input options
        timing=$("$b/src/cli/rkdeploy" run $args --backend "$backend" --threads $t --repeat $((RUNS + 1)) 2>&1 >/dev/null | grep 'median')
        med=$(echo "$timing" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
        min=$(echo "$timing" | sed -n 's/.*min \([0-9.]*\) ms.*/\1/p')
        echo "{\"build\": \"$who\", \"model\": \"$model\", \"backend\": \"$backend\", \"threads\": $t, \"median_ms\": $med, \"min_ms\": $min, \"round\": $round}"
      done
    done
  done
done
