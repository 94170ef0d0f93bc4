#!/bin/bash
# rkdeploy plan and bench on the reduced-width reference models: the as-is DEIMv2 deployment
# fails on rk3576-rknn-2.3.2 naming its GridSample nodes, the other variants plan with k and
# terms that add up, calibration reproduces its fit point, YOLOv8n plans with k = 0 on
# rk3588-rkdeploy, degenerate inputs are refused, bench reports P50/P95 with its environment,
# and the HTML report renders in headless Chromium with the JSON's numbers.
#   test_plan.sh RKDEPLOY MODELS_DIR
set -euo pipefail
rkd="$1"; models="$2"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
photo=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
deim="$models/deimv2_s_arch_tiny.onnx"

"$rkd" plan "$deim" --target rk3576-rknn-2.3.2 --image "$photo" --discrete-model "$models/deimv2_s_arch_discrete_tiny.onnx" \
  --runs 1 --calibrate "$here/targets/measurements/deimv2-s-rk3576-rknn-2.3.2.json" --json \
  --html "$work/plan.html" --markdown "$work/plan.md" > "$work/plan.json"
/usr/bin/python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
rep = json.load(open(f"{work}/plan.json"))
v = {x["variant"]: x for x in rep["variants"]}
assert set(v) == {"as-is", "custom-op-cpu", "custom-op-gpu", "fused-fallback", "decoder-on-cpu", "discrete"}, v.keys()
a = v["as-is"]
assert not a["executable"] and a["planned"], a
gs = [f for f in a["failures"] if "(GridSample)" in f and "Unsupport CPU op" in f]
assert len(gs) == len(a["failures"]) == 6, a["failures"]   # 2 decoder layers x 3 levels
for name, x in v.items():
    if name == "as-is": continue
    assert x["executable"], (name, x["failures"])
    assert abs(sum(x["terms_ms"].values()) - x["total_ms"]) <= 1e-9 * x["total_ms"], name
    assert x["k"] == len(x["segments"]) - 1, name
    assert sum(s["boundary_ms"] for s in x["segments"]) > 0 or x["k"] == 0, name
assert v["decoder-on-cpu"]["k"] == 1, v["decoder-on-cpu"]["k"]
assert v["custom-op-cpu"]["k"] >= 2 and v["fused-fallback"]["k"] >= 2
assert any("different model" in n for n in v["discrete"]["notes"])
assert not any(f["op"] == "GridSample" for f in v["discrete"]["fallbacks"])
# Calibration: one fit row (reproduced), two check rows (predicted, error reported).
c = rep["calibration"]
rows = {r["variant"]: r for r in c["rows"]}
assert rows["custom-op-cpu"]["role"] == "fit" and abs(rows["custom-op-cpu"]["error_pct"]) < 0.1, rows
assert rows["fused-fallback"]["role"] == "check" and rows["fused-fallback"]["measured_ms"] == 856.5
assert abs(rows["custom-op-cpu"]["predicted_ms"] - v["custom-op-cpu"]["total_ms"]) < 1e-6
assert c["after"]["npu.utilization"] != c["before"]["npu.utilization"]
md = open(f"{work}/plan.md").read()
assert "| as-is | fails |" in md and "## Calibration" in md
print("plan: as-is fails on 6 GridSample nodes; k =", {n: x.get("k") for n, x in v.items()},
      "; fused-fallback predicted", round(rows["fused-fallback"]["predicted_ms"], 1), "ms for 856.5 measured")
PY

# Board-measured CPU times replace the host's: 5 ms per GridSample.
echo '{"schema": "rkdeploy-cpu-times/1", "ops": {"GridSample": 5.0}}' > "$work/times.json"
"$rkd" plan "$deim" --target rk3576-rknn-2.3.2 --variant custom-op-cpu --image "$photo" --runs 1 --cpu-times "$work/times.json" --json > "$work/times_plan.json"
/usr/bin/python3 -c "
import json, sys
v = json.load(open(sys.argv[1]))['variants'][0]
gs = [f for f in v['fallbacks'] if f['op'] == 'GridSample']
assert len(gs) == 1 and gs[0]['count'] == 6 and abs(gs[0]['ms'] - 30.0) < 1e-9, gs
print('plan: --cpu-times sets the 6 GridSample nodes to 30.0 ms')" "$work/times_plan.json"
echo '{"schema": "rkdeploy-cpu-times/1", "ops": {"GridSample": -1}}' > "$work/bad_times.json"

# YOLOv8n-style on rkdeploy's own stack, as the profile places it: every op the profile marks
# lowered: false (within the hardware's reach, not emitted by the lowering) falls back to the
# CPU with the rule's reason and a note (the head's DFL Softmax among them; the SiLUs' Sigmoid
# and Mul are lowered, and the head's Sigmoid on [N, C, L] rows too), so the graph crosses devices into its
# post-processing; `all` (the default) plans as-run first on this profile.
"$rkd" plan "$models/yolov8n_arch_tiny.onnx" --target rk3588-rkdeploy --variant as-is --image "$photo" --runs 1 --json > "$work/yolo.json"
"$rkd" plan "$models/yolov8n_arch_tiny.onnx" --target rk3588-rkdeploy --image "$photo" --runs 1 --json > "$work/yolo_all.json"
/usr/bin/python3 -c "
import json, sys
v = json.load(open(sys.argv[1]))['variants'][0]
assert v['variant'] == 'as-is' and v['executable'] and v['k'] >= 1, v['k']
fb = {f['op']: f for f in v['fallbacks']}
assert fb['Softmax']['device'] == 'cpu' and fb['Softmax']['reason'].startswith('not lowered by this runtime yet'), fb.get('Softmax')
assert 'Sigmoid' not in fb, fb['Sigmoid']
assert any('the lowering does not emit them yet' in n for n in v['notes']), v['notes']
assert [x['variant'] for x in json.load(open(sys.argv[2]))['variants']][0] == 'as-run'
print(f\"plan: yolov8n as the profile places it on rk3588-rkdeploy, k = {v['k']}\")" "$work/yolo.json" "$work/yolo_all.json"

# as-run: the graph `run --backend sim` executes. The float model is not planned (the int8
# back ends refuse it, and the failure says so); quantized, its convolutions and Adds are the
# runtime's NPU nodes and every other node a CPU node.
mkdir -p "$work/calib" && cp "$photo" "$work/calib/"
"$rkd" quantize "$models/yolov8n_arch_tiny.onnx" --calib "$work/calib" --method percentile -o "$work/yolo.qdq.onnx" > /dev/null
"$rkd" plan "$models/yolov8n_arch_tiny.onnx" --target rk3588-rkdeploy --variant as-run --image "$photo" --runs 1 --json > "$work/yolo_run_float.json"
"$rkd" plan "$work/yolo.qdq.onnx" --target rk3588-rkdeploy --variant as-is --variant as-run --image "$photo" --runs 1 --json > "$work/yolo_run.json"
/usr/bin/python3 -c "
import json, sys
f = json.load(open(sys.argv[1]))['variants'][0]
assert f['variant'] == 'as-run' and not f['planned'] and 'rkdeploy quantize' in f['failures'][0], f
v = {x['variant']: x for x in json.load(open(sys.argv[2]))['variants']}
r = v['as-run']
assert r['executable'] and r['k'] > 0, r
npu = [s for s in r['segments'] if s['device'] == 'npu']
assert npu and sum(s['nodes'] for s in npu) > 0, r['segments']
fb = {x['op']: x for x in r['fallbacks']}
assert 'rkdeploy.NpuConv' not in fb and 'rkdeploy.NpuAdd' not in fb, fb.keys()   # NPU nodes are not fallbacks
# Every NPU node priced from its lowered tasks against its ideal, the most time above it first.
eff = r['npu_efficiency']
assert len(eff) == r['nodes_by_device']['npu'], (len(eff), r['nodes_by_device'])
assert [e['excess_ms'] for e in eff] == sorted((e['excess_ms'] for e in eff), reverse=True)
for e in eff:
    assert e['tasks'] >= 1 and e['jobs'] >= 1 and e['bytes'] > 0 and abs(e['excess_ms'] - (e['ms'] - e['ideal_ms'])) < 1e-9, e
    if e['op'] == 'rkdeploy.NpuConv':
        assert 0 < e['mac_utilization'] <= 1 and e['padded_macs'] >= e['macs'] > 0, e
print('plan: quantized yolov8n as run: k = %d (as-is %d), %d nodes on the NPU' % (r['k'], v['as-is']['k'], sum(s['nodes'] for s in npu)))" \
  "$work/yolo_run_float.json" "$work/yolo_run.json"

# Degenerate inputs are refused with the reason, exit code 2.
/usr/bin/python3 -c "
import numpy as np, sys
np.save(sys.argv[1] + '/zero_sizes.npy', np.zeros((1, 2), np.int64))
np.save(sys.argv[1] + '/sizes.npy', np.array([[640, 480]], np.int64))
np.save(sys.argv[1] + '/zero_images.npy', np.zeros((1, 3, 320, 320), np.float32))
np.save(sys.argv[1] + '/images.npy', np.random.default_rng(1).random((1, 3, 320, 320), np.float32))" "$work"
expect_refusal() {  # expect_refusal PATTERN COMMAND...
  local pattern="$1"; shift
  set +e; "$@" > /dev/null 2> "$work/err"; local rc=$?; set -e
  [ "$rc" = 2 ] || { echo "expected exit 2, got $rc: $*"; cat "$work/err"; exit 1; }
  grep -q "$pattern" "$work/err" || { echo "expected '$pattern' in:"; cat "$work/err"; exit 1; }
}
expect_refusal "scaled to zero" "$rkd" plan "$deim" --target rk3588-rknn-2.3.2 --input "images=$work/images.npy" --input "orig_target_sizes=$work/zero_sizes.npy"
expect_refusal "every element is 0" "$rkd" bench "$deim" --input "images=$work/zero_images.npy" --input "orig_target_sizes=$work/sizes.npy"
expect_refusal "known: " "$rkd" plan "$deim" --target rk9999 --image "$photo"
echo '{"schema": "rkdeploy-target/1", "name": 3}' > "$work/bad.json"
expect_refusal "bad.json: profile.name: must be a string" "$rkd" plan "$deim" --target "$work/bad.json" --image "$photo"
expect_refusal "ops.GridSample: must be milliseconds" "$rkd" plan "$deim" --target rk3588-rknn-2.3.2 --variant as-is --image "$photo" --runs 1 --cpu-times "$work/bad_times.json"
expect_refusal "unknown variant" "$rkd" plan "$deim" --target rk3588-rknn-2.3.2 --variant fastest --image "$photo"

# A graph the host cannot run (an ONNX op rkdeploy has no kernel for, Softsign, its output
# shape given in the file) is still placed; the node is reported with the reason instead of the whole
# plan being refused.
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
w = numpy_helper.from_array(np.random.RandomState(0).randn(4, 3, 3, 3).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                       helper.make_node("Softsign", ["c"], ["m"], name="softsign"),
                       helper.make_node("Relu", ["m"], ["y"], name="relu")],
                      "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w],
                      value_info=[helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 4, 8, 8])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), f"{sys.argv[1]}/unrunnable.onnx")
np.save(f"{sys.argv[1]}/unrunnable_x.npy", np.random.RandomState(1).randn(1, 3, 8, 8).astype(np.float32))
PY
"$rkd" plan "$work/unrunnable.onnx" --target rk3588-rkdeploy --input x="$work/unrunnable_x.npy" --variant as-is --json > "$work/unrunnable.json"
/usr/bin/python3 - "$work/unrunnable.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))['variants'][0]
assert not v['executable'] and v['planned'], v
assert any("node 'softsign' (Softsign): no CPU kernel" in f for f in v['failures']), v['failures']
print('plan of an unrunnable graph:', v['failures'])
PY

# bench: percentiles and the environment.
"$rkd" bench "$models/yolov8n_arch_tiny.onnx" --image "$photo" --warmup 1 --runs 20 --json > "$work/bench.json"
/usr/bin/python3 -c "
import json, sys
b = json.load(open(sys.argv[1]))
for k in ('forward_ms', 'end_to_end_ms'):
    s = b[k]; assert 0 < s['min'] <= s['p50'] <= s['p95'] <= s['max'], (k, s)
e = b['environment']
for k in ('rkdeploy', 'compiler', 'cpu', 'threads', 'onednn', 'highway', 'isa_ceiling', 'highway_target', 'onednn_isa',
          'int8_products', 'vectorised_loops'): assert e.get(k), (k, e)
assert e['threads'] == 1 and isinstance(e['hardware_threads'], int), e   # the default, 1: the count used, a number
print('bench: forward P50 %.2f ms, P95 %.2f ms; end to end P50 %.2f ms' % (b['forward_ms']['p50'], b['forward_ms']['p95'], b['end_to_end_ms']['p50']))" "$work/bench.json"
# --threads 0: the threads used are reported (all cores), not the 0 asked for.
"$rkd" bench "$models/yolov8n_arch_tiny.onnx" --image "$photo" --warmup 0 --runs 1 --threads 0 --json > "$work/bench0.json"
/usr/bin/python3 -c "
import json, sys
b = json.load(open(sys.argv[1]))
e = b['environment']
assert e['threads'] == e['hardware_threads'] >= 1, e
# One run has no 95th percentile (it would be the maximum): null, not the maximum under its name.
assert b['forward_ms']['p95'] is None and b['end_to_end_ms']['p95'] is None, b" "$work/bench0.json"
"$rkd" bench "$models/yolov8n_arch_tiny.onnx" --image "$photo" --warmup 0 --runs 3 > "$work/bench3.txt"
grep -q "P95 n/a (< 20 runs)" "$work/bench3.txt" || { cat "$work/bench3.txt"; echo "bench with 3 runs printed a P95"; exit 1; }
# The dispatch it records follows the ISA ceiling (x86-64: an AVX2 ceiling leaves no AVX-512 and
# no VNNI anywhere); a bad ceiling is a usage error.
if [ "$(uname -m)" = x86_64 ]; then
  RKD_MAX_ISA=avx2 "$rkd" bench "$models/yolov8n_arch_tiny.onnx" --image "$photo" --warmup 0 --runs 1 --threads 1 --json > "$work/bench_avx2.json"
  /usr/bin/python3 -c "
import json, sys
e = json.load(open(sys.argv[1]))['environment']
assert e['isa_ceiling'] == 'avx2' and e['highway_target'] in ('AVX2', 'SSE4', 'SSSE3') and 'avx512' not in e['onednn_isa'] \
    and 'vnni' not in e['onednn_isa'] and e['int8_products'] == 'highway_AVX2' and e['vectorised_loops'] != 'x86-64-v4', e
print('bench under RKD_MAX_ISA=avx2:', {k: e[k] for k in ('highway_target', 'onednn_isa', 'int8_products', 'vectorised_loops')})" "$work/bench_avx2.json"
  set +e; RKD_MAX_ISA=avx3000 "$rkd" bench "$models/yolov8n_arch_tiny.onnx" --image "$photo" > /dev/null 2> "$work/bad_isa.err"; rc=$?; set -e
  [ "$rc" = 2 ] && grep -q "RKD_MAX_ISA=avx3000" "$work/bad_isa.err" || { echo "bad RKD_MAX_ISA: exit $rc, $(cat "$work/bad_isa.err")"; exit 1; }
fi

# The HTML report in headless Chromium without network: the numbers equal the JSON's.
browser=(chromium --headless=new --no-sandbox --disable-gpu --no-proxy-server --proxy-server='direct://'
         --host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir="$work/profile")
"${browser[@]}" --dump-dom "file://$work/plan.html" > "$work/dom.html" 2>> "$work/chromium.log"
"${browser[@]}" --window-size=1100,1400 --screenshot="$work/shot.png" "file://$work/plan.html" 2>> "$work/chromium.log"
/usr/bin/python3 - "$work" <<'PY'
import json, sys
from html.parser import HTMLParser
import numpy as np
from skimage import io
work = sys.argv[1]
rep = json.load(open(f"{work}/plan.json"))
class P(HTMLParser):
    def __init__(self):
        super().__init__(); self.cells = {}; self.cur = None; self.segments = {}; self.terms = {}; self.svg = None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg" and a.get("class") == "timeline": self.svg = a["data-variant"]
        if tag == "rect" and a.get("class") == "segment": self.segments.setdefault(self.svg, []).append(float(a["data-ms"]))
        if tag == "rect" and a.get("class") == "term": self.terms[(a["data-variant"], a["data-term"])] = float(a["data-ms"])
        if tag == "td" and "data-field" in a: self.cur = (a["data-variant"], a["data-field"]); self.cells[self.cur] = ""
    def handle_data(self, d):
        if self.cur: self.cells[self.cur] += d
    def handle_endtag(self, tag):
        if tag == "td": self.cur = None
p = P(); p.feed(open(f"{work}/dom.html").read())
checked = 0
for v in rep["variants"]:
    name = v["variant"]
    if not v["executable"]:
        assert p.cells[(name, "status")] == "fails", name; continue
    assert int(p.cells[(name, "k")]) == v["k"]
    assert abs(float(p.cells[(name, "total_ms")]) - v["total_ms"]) <= 1e-5 * v["total_ms"]
    for t, ms in v["terms_ms"].items():
        assert abs(float(p.cells[(name, t)]) - ms) <= 1e-5 * max(ms, 1e-3), (name, t)
        if ms > 0: assert abs(p.terms[(name, t)] - ms) <= 1e-9 * max(ms, 1), (name, t); checked += 1
    seg = p.segments[name]
    assert len(seg) == len(v["segments"]) and all(abs(a - b["ms"]) <= 1e-9 * max(1, a) for a, b in zip(seg, v["segments"])), name
img = io.imread(f"{work}/shot.png")[..., :3].astype(int)
npu = np.all(np.abs(img - [0x2f, 0x7e, 0xd8]) < 30, axis=-1).sum()
cpu = np.all(np.abs(img - [0xe4, 0x57, 0x2e]) < 30, axis=-1).sum()
assert npu > 500 and cpu > 50, f"timeline not drawn ({npu} NPU, {cpu} CPU pixels)"
print(f"plan html: summary, {checked} stacked terms and every timeline segment equal the JSON; {npu}/{cpu} NPU/CPU pixels rendered")
PY
