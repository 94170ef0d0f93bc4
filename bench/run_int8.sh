#!/usr/bin/env bash
# int8 whole-model latency: the five TensorFlow.js detectors quantized by `rkdeploy quantize`
# (percentile, per-channel weights), each QDQ file run by rkdeploy (--backend int8: integer
# kernels, the oneDNN VNNI convolution where available), by rkdeploy with the convolutions on
# the RK3588 NPU simulator (--backend sim, default strategy), and by ONNX Runtime 1.30 (its
# QDQ fusions, default optimizations) on the same input, 1 and 2 threads, in the same run.
# ROUNDS (default 1) repeats the whole measurement, the three peers interleaved per model so
# that a shared machine's drift hits all of them; each line carries its round.
# Usage: [ROUNDS=N] bash bench/run_int8.sh BUILD_DIR [RUNS] > results.jsonl   (needs the
# human_models fixture: make test); python3 bench/summarize_int8.py results.jsonl: the table.
set -euo pipefail
source "$(dirname "$0")/int8_models.sh"
BUILD=${1:-build}
RUNS=${2:-10}
ROUNDS=${ROUNDS:-1}
RKD=$BUILD/src/cli/rkdeploy
H=$BUILD/human
# Quantized before any timing (a pipe would quantize the next model during the measurement).
models=$(int8_models "$RKD" "$BUILD")
for round in $(seq "$ROUNDS"); do
while read -r name input q; do
  for t in 1 2; do
    for b in int8 sim; do
      med=$("$RKD" run "$q" --backend $b --input "$input=$H/inputs/$name.input.npy" --threads $t --repeat $((RUNS + 1)) 2>&1 >/dev/null |
            sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
      echo "{\"peer\": \"rkdeploy-$b\", \"model\": \"$name\", \"threads\": $t, \"median_ms\": $med, \"round\": $round}"
    done
  done
  node bench/peers/ort_model_peer.js "$q" "$RUNS" | sed 's/"peer": *"[^"]*"/"peer": "onnxruntime"/; s/}$/, "round": '"$round"'}/'
done <<< "$models"
done
