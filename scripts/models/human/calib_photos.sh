#!/bin/bash
# Copies skimage's real photographs (python3-skimage) into DIR as the calibration set of
# `rkdeploy quantize` in tests and docs. astronaut.png is left out: it is the photo the
# accuracy report is measured on.
set -euo pipefail
dir="${1:-build/human/calib}"
src=/usr/lib/python3/dist-packages/skimage/data
mkdir -p "$dir"
for f in chelsea.png coffee.png motorcycle_left.png motorcycle_right.png rocket.jpg hubble_deep_field.jpg \
         retina.jpg ihc.png color.png camera.png coins.png grass.png; do
  cp "$src/$f" "$dir/$f"
done
