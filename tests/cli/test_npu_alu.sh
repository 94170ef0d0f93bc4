#!/bin/bash
# ONNX QDQ Sub, Max and Min of two int8 maps and Add, Sub, Max of a map and one value per
# channel (make_qdq_ops.py's sub / max / min / addpc / subpc / maxpc) on the NPU: each becomes
# one DPU-only task (EW_ALU_ALGO 4 / 0 / 1 / 2; a per-channel B read in EW_DATA_MODE 0) whose
# simulated output equals the int8 reference's rknpu_out_cvt arithmetic byte for byte, and
# `compile` lists it as an element-wise entry (main input A: the minuend, or the map). ONNX Runtime's arithmetic for the same
# graphs is tests/cli/ort_oracle.sh's (bit-identical, in test_quantize.sh).
#   test_npu_alu.sh RKDEPLOY
set -euo pipefail
rk="$1"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$here/scripts/models/make_qdq_ops.py" "$work" 7 > /dev/null
ins=(--input "x=$work/x.npy" --input "y=$work/y.npy")
for op in sub max min addpc subpc maxpc; do
  "$rk" run "$work/$op.onnx" --backend int8 --requant rknpu_out_cvt "${ins[@]}" --output-dir "$work/$op.int8" > /dev/null
  "$rk" run "$work/$op.onnx" --backend sim --requant rknpu_out_cvt "${ins[@]}" --output-dir "$work/$op.sim" > /dev/null 2> "$work/$op.log"
  if [ "$op" = addpc ]; then want="; 1 Add(s) as DPU tasks, 0 on the CPU;"; else want="; 1 Sub/Max/Min as DPU tasks, 0 on the CPU;"; fi
  grep -q "$want" "$work/$op.log" || { cat "$work/$op.log"; exit 1; }
  cmp "$work/$op.int8/o_dq.npy" "$work/$op.sim/o_dq.npy"
  "$rk" compile "$work/$op.onnx" -o "$work/$op.rk3588" > /dev/null
  /usr/bin/python3 - "$work/$op.rk3588/manifest.json" "$op" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
e = m["elementwise"]
op = sys.argv[2]
assert len(e) == 1 and e[0]["op"] == op[:3].capitalize() and len(e[0]["tasks"]) == 1, e
if op.startswith("sub") or op.endswith("pc"):
    assert [i["operand"] for i in e[0]["inputs"]] == ["A", "B"], e  # the minuend, or the map, is the main input
assert e[0]["inputs"][1].get("per_channel", False) == op.endswith("pc"), e
PY
  echo "$op: the simulated DPU task equals the int8 reference (rknpu_out_cvt) byte for byte"
done
