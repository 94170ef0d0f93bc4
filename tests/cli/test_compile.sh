#!/bin/bash
# rkdeploy compile on the committed int8 TFLite convolution: manifest.json describes every
# file and buffer, each task's register commands decode without problems, and a failed
# compile leaves an earlier output directory untouched.
set -euo pipefail
rk="$1"
model="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$rk" compile "$model" -o "$tmp/out" > "$tmp/log"
grep -q "1 convolution(s) and 0 element-wise op(s) in .* task(s) for rk3588 (sorted-bs-multiplier)" "$tmp/log"
/usr/bin/python3 - "$tmp/out" <<'PY'
import json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
assert m["target"] == "rk3588" and m["strategy"] == "sorted-bs-multiplier"
assert len(m["convolutions"]) == 1, m["convolutions"]
c = m["convolutions"][0]
assert c["geometry"]["C"] == 2 and c["geometry"]["OC"] == 3 and c["geometry"]["dtype"] == "int8"
channels = []
for t in c["tasks"]:
    assert os.path.getsize(os.path.join(d, t["regcmd"])) == 8 * t["words"], t
    for b in t["buffers"]:
        if "file" in b:
            assert os.path.getsize(os.path.join(d, b["file"])) == b["bytes"], b
        assert b["device_offset"] + b["bytes"] <= m["device_bytes"]
    channels += [k for k in t["output"]["channels"] if k >= 0]
assert sorted(channels) == [0, 1, 2], channels          # every output channel, once
assert all(x["reason"] for x in m["cpu"])
# Its work against the least it needs: the node's MACs from its geometry; its tasks compute 16
# input channels and 32 output channels of it (the atomic sizes) and move at least its bytes.
g, w = c["geometry"], c["work"]
assert w["macs"] == g["OH"] * g["OW"] * g["OC"] * g["C"] * g["KH"] * g["KW"], (w, g)
assert w["padded_macs"] >= g["OH"] * g["OW"] * 32 * 16 * g["KH"] * g["KW"], w
assert abs(w["mac_utilization"] - w["macs"] / w["padded_macs"]) < 1e-12 and abs(w["traffic_ratio"] - w["bytes"] / w["min_bytes"]) < 1e-12, w
assert w["bytes"] >= w["min_bytes"] > 0, w
print("manifest ok:", len(c["tasks"]), "tasks")
PY
for f in "$tmp"/out/conv000/*.regcmd; do
  "$rk" regcmd decode "$f" > "$tmp/dis.txt"
  if grep -q "problem:" "$tmp/dis.txt"; then echo "test_compile.sh: unexpected match: grep -q problem: $tmp/dis.txt" >&2; exit 1; fi
done
# A failing compile leaves the previous output as it was.
before=$(cat "$tmp/out/manifest.json" | md5sum)
set +e
"$rk" compile "$tmp/missing.tflite" -o "$tmp/out" --force 2> "$tmp/err"
st=$?
set -e
[ "$st" -ne 0 ] || { echo "compile of a missing file succeeded"; exit 1; }
grep -q "missing.tflite" "$tmp/err"
[ "$(cat "$tmp/out/manifest.json" | md5sum)" = "$before" ]
echo "compile CLI: ok"
