#!/bin/bash
# rkdeploy regcmd decode|diff on the committed two-task buffer (tests/data/regcmd): text and
# JSON views agree on the registers, diff's exit status and field names, clear errors.
set -euo pipefail
rk="$1"
data="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$rk" regcmd decode "$data/two_conv_tasks.txt" > "$tmp/dis.txt"
grep -q "^task 0: words 0..15, 11 register writes, 1 padding" "$tmp/dis.txt"
grep -q "DPU.BS_MUL_CFG .*BS_MUL_SRC=1 .*BS_MUL_SHIFT_VALUE=14" "$tmp/dis.txt"
grep -q "trailer: next 0x00008080, next amount 7, enable 0x1d" "$tmp/dis.txt"
grep -q "trailer: next none (end of chain)" "$tmp/dis.txt"
"$rk" regcmd decode --json "$data/two_conv_tasks.txt" > "$tmp/dis.json"
/usr/bin/python3 - "$tmp/dis.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j["tasks"]) == 2, j["tasks"]
t0 = j["tasks"][0]
assert t0["trailer"] == {"next_address": 0x8080, "next_amount": 7, "enable_mask": 0x1d}, t0["trailer"]
w = {x["register"]: x for x in t0["writes"]}
assert w["BS_CFG"]["fields"]["BS_ALU_ALGO"] == 2 and w["BS_CFG"]["block"] == "DPU"
assert w["DATA_SIZE0"]["fields"] == {"DATAIN_HEIGHT": 30, "DATAIN_WIDTH": 40}
assert j["tasks"][1]["trailer"]["next_address"] is None
assert all(not t["problems"] for t in j["tasks"])
PY
# Raw binary form of the same words decodes the same.
/usr/bin/python3 -c '
import struct, sys
ws = [int(l.split("#")[0], 16) for l in open(sys.argv[1]) if l.split("#")[0].strip()]
open(sys.argv[2], "wb").write(b"".join(struct.pack("<Q", w) for w in ws))' "$data/two_conv_tasks.txt" "$tmp/two.bin"
"$rk" regcmd decode "$tmp/two.bin" | cmp - "$tmp/dis.txt"

"$rk" regcmd diff "$data/two_conv_tasks.txt" "$tmp/two.bin" > "$tmp/diff.txt"
grep -q "no register differences in 2 tasks" "$tmp/diff.txt"
set +e
"$rk" regcmd diff "$data/two_conv_tasks.txt" "$data/two_conv_tasks_round.txt" > "$tmp/diff.txt"
st=$?
set -e
[ "$st" -eq 1 ] || { echo "diff of different buffers exited $st, expected 1"; exit 1; }
grep -q "task 1  DPU.OUT_CVT_SHIFT  0x0000001c -> 0x4000001c  CVT_ROUND 0 -> 1" "$tmp/diff.txt"

printf '\x01\x02\x03' > "$tmp/short.bin"
set +e
"$rk" regcmd decode "$tmp/short.bin" 2> "$tmp/err.txt"
st=$?
set -e
[ "$st" -eq 2 ] || { echo "truncated file exited $st, expected 2"; exit 1; }
grep -q "short.bin: 3 bytes is not a whole number of 64-bit words" "$tmp/err.txt"
echo "regcmd CLI: ok"
