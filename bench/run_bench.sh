#!/usr/bin/env bash
# Runs rkdeploy's sampling benchmarks and the peers (PyTorch, ONNX Runtime) in one run and
# prints the comparison table for BENCHMARKS.md. Usage: bench/run_bench.sh [BUILD_DIR]
# Needs: scripts/setup.sh --bench (python3-torch, python3-onnx, Node.js + npm).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
out="$build/bench_results"
mkdir -p "$out"

if [ ! -d "$here/peers/node_modules/onnxruntime-node" ]; then
  # --ignore-scripts: the package's install step downloads GPU add-ons; the CPU library
  # ships inside the package.
  (cd "$here/peers" && npm install --ignore-scripts --no-audit --no-fund)
fi
/usr/bin/python3 "$here/peers/make_onnx_models.py" "$out/models" >/dev/null

echo "== rkdeploy (Google Benchmark)" >&2
"$build/bench/bench_sampling" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/rkdeploy.json" --benchmark_out_format=json >&2
echo "== PyTorch" >&2
/usr/bin/python3 "$here/peers/torch_peer.py" | tee "$out/torch.jsonl" >&2
echo "== ONNX Runtime" >&2
node "$here/peers/ort_peer.js" "$out/models" | tee "$out/ort.jsonl" >&2
echo "== rkdeploy again (drift check)" >&2
"$build/bench/bench_sampling" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/rkdeploy2.json" --benchmark_out_format=json >/dev/null
/usr/bin/python3 "$here/summarize.py" "$out"
