#!/bin/bash
# Installs TensorFlow Lite itself, as the WebAssembly build of its C++ runtime that npm's
# @tensorflow/tfjs-tflite ships (wasm/tflite_web_api_cc.wasm: the TFLite interpreter with its
# builtin kernels and the XNNPACK delegate), into DIR (default build/tflite_peer). Run by
# Node.js through tflite_run.js; no TensorFlow.js code is involved.
set -euo pipefail
dir="${1:-build/tflite_peer}"
mkdir -p "$dir"
if [ ! -f "$dir/node_modules/@tensorflow/tfjs-tflite/wasm/tflite_web_api_cc.wasm" ]; then
  # The package declares a peer dependency on tfjs-core that the WebAssembly runtime does not use.
  (cd "$dir" && npm install --no-save --legacy-peer-deps --ignore-scripts --no-audit --no-fund --loglevel=error \
    @tensorflow/tfjs-tflite@0.0.1-alpha.10 >/dev/null)
fi
echo "TFLite (WebAssembly) in $dir"
