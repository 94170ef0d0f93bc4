#!/usr/bin/env bash
# Whole-model latency of the reference models at 640x640: rkdeploy's CPU executor vs ONNX
# Runtime 1.30 on the same file, 1 and 2 threads, in the same run. Peak RSS of each process.
# Usage: bash bench/run_models.sh BUILD_DIR [RUNS]   (needs make models)
set -euo pipefail
BUILD=${1:-build}
RUNS=${2:-10}
RKD=$BUILD/src/cli/rkdeploy
for m in yolov8n_arch deimv2_s_arch deimv2_s_arch_discrete; do
  f=$BUILD/models/$m.onnx
  [ -f "$f" ] || { echo "missing $f: run make models" >&2; exit 1; }
  ins=()
  for i in "$BUILD"/models/$m.input_*.npy; do n=${i##*.input_}; ins+=(--input "${n%.npy}=$i"); done
  for t in 1 2; do
    out=$( { /usr/bin/time -f "rss_kb %M" "$RKD" run "$f" "${ins[@]}" --threads $t --repeat $((RUNS + 1)) > /dev/null; } 2>&1 )
    med=$(echo "$out" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
    rss=$(echo "$out" | sed -n 's/rss_kb \([0-9]*\)/\1/p')
    echo "{\"peer\": \"rkdeploy\", \"model\": \"$m\", \"threads\": $t, \"median_ms\": $med, \"rss_mb\": $((rss / 1000))}"
  done
  node bench/peers/ort_model_peer.js "$f" "$RUNS"
done
