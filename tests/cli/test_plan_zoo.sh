#!/bin/bash
# The vendor profiles against the vendor's own figures: the model zoo's detectors, as its exports
# cut them (scripts/models/yolo_zoo.py, random weights at 640), planned as-is on
# rk3588-rknn-2.3.2 and rk3576-rknn-2.3.2 as shipped (each SoC's one description,
# targets/soc/) predict the zoo's published latencies within 15 % on the rows the SoC was
# fitted to and within 20 % on the rows held back (RK3588: three; RK3576: YOLOv8n); refitting
# them (plan --calibrate with the calibration set) lands within the same bounds.
#   test_plan_zoo.sh RKDEPLOY
set -euo pipefail
rk="$1"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$here/scripts/models/make_models.py" "$work" --models zoo --quiet > "$work/models.log"
cat "$work/models.log"
for case in "rk3588-rknn-2.3.2 rknn-model-zoo-2.3.2 7" "rk3576-rknn-2.3.2 rknn-model-zoo-2.3.2-rk3576 3"; do
  read -r target set rows <<< "$case"
  "$rk" plan --target "$target" --calibrate "$here/targets/measurements/$set.json" --models-dir "$work" --json > "$work/fit.json" 2> /dev/null
  /usr/bin/python3 - "$work/fit.json" "$target" "$rows" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["calibration"]
rows = c["rows"]
assert len(rows) == int(sys.argv[3]) and {r["role"] for r in rows} == {"fit", "check"}, rows
print(sys.argv[2])
for r in rows:
    bound = 15 if r["role"] == "fit" else 20
    shipped = 100 * (r["predicted_before_ms"] - r["measured_ms"]) / r["measured_ms"]
    assert abs(shipped) <= bound, (r["model"], r["role"], shipped)
    assert abs(r["error_pct"]) <= bound, (r["model"], r["role"], r["error_pct"])
    print(f"  {r['model']:24s} {r['role']:5s} measured {r['measured_ms']:6.2f} ms, shipped {r['predicted_before_ms']:6.2f} ms ({shipped:+5.1f} %),"
          f" refitted {r['predicted_ms']:6.2f} ms ({r['error_pct']:+5.1f} %)")
print("  refitted:", {k: round(v, 3) for k, v in c["after"].items()})
PY
done
