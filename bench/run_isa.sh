#!/usr/bin/env bash
# What the fast paths are worth per instruction set, on one machine: the same binaries under
# instruction-set ceilings (RKD_MAX_ISA, src/core/isa.h), interleaved per ceiling in one run:
#  - the sampling kernels (Google Benchmark, bench_sampling: GridSample level 0 bilinear and the
#    fused deformable-attention layer, 1 thread);
#  - the five TensorFlow.js detectors quantized (as bench/run_int8.sh), `--backend int8` and
#    `--backend sim`, 1 thread, median of RUNS after a warm-up; ONNX Runtime 1.30 on the same
#    file once per model as the yardstick (it cannot be capped: it runs this CPU's best kernels).
# Usage: bash bench/run_isa.sh BUILD_DIR [RUNS] [CEILINGS...] > isa.jsonl   (default RUNS 5,
# ceilings native avx512 avx2 sse4; needs the human_models fixture of `make test`), then
# python3 bench/summarize_isa.py isa.jsonl prints the tables of BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/int8_models.sh"
BUILD=${1:-build}; RUNS=${2:-5}; shift $(( $# > 2 ? 2 : $# ))
CEILINGS=("$@"); [ ${#CEILINGS[@]} -gt 0 ] || CEILINGS=(native avx512 avx2 sse4)
RKD=$BUILD/src/cli/rkdeploy
H=$BUILD/human
for isa in "${CEILINGS[@]}"; do
  RKD_MAX_ISA=$isa "$BUILD/bench/bench_sampling" --benchmark_filter='BM_GridSample/level:0/threads:1/mode:0|BM_DeformAttnLayer/threads:1/method:0' \
    --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_format=json 2> /dev/null |
    /usr/bin/python3 -c '
import json, sys
for b in json.load(sys.stdin)["benchmarks"]:
    if b.get("aggregate_name") == "median":
        print(json.dumps({"kind": "kernel", "isa": sys.argv[1], "name": b["run_name"], "median_us": b["real_time"] / 1e3 if b["time_unit"] == "ns" else b["real_time"]}))' "$isa"
done
# Quantized before any timing (a pipe would quantize the next model during the measurement).
models=$(int8_models "$RKD" "$BUILD")
while read -r name input q; do
  for isa in "${CEILINGS[@]}"; do
    for b in int8 sim; do
      line=$(RKD_MAX_ISA=$isa "$RKD" run "$q" --backend $b --input "$input=$H/inputs/$name.input.npy" --threads 1 --repeat $((RUNS + 1)) 2>&1 >/dev/null)
      med=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' <<< "$line")
      echo "{\"kind\": \"model\", \"isa\": \"$isa\", \"peer\": \"rkdeploy-$b\", \"model\": \"$name\", \"median_ms\": $med}"
    done
  done
  node bench/peers/ort_model_peer.js "$q" "$RUNS" | /usr/bin/python3 -c '
import json, sys
for l in sys.stdin:
    j = json.loads(l)
    if j.get("threads", 1) == 1: print(json.dumps({"kind": "model", "isa": "native", "peer": "onnxruntime", "model": sys.argv[1], "median_ms": j["median_ms"]}))' "$name"
done <<< "$models"
