// Runs every model written by make_models.py with ONNX Runtime (onnxruntime-node, from
// bench/peers) on its stored input and compares with PyTorch's stored outputs:
// node scripts/models/check_with_ort.js DIR. Prints max |diff| per output; exits 1 when an
// integer output differs or a float output differs by more than 1e-3 relative to its range.
'use strict';
const path = require('path');
const fs = require('fs');
const ort = require(path.join(__dirname, '..', '..', 'bench', 'peers', 'node_modules', 'onnxruntime-node'));

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const hlen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + hlen);
  const descr = /'descr': '([^']+)'/.exec(header)[1];
  const shape = /'shape': \(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const data = buf.subarray(10 + hlen);
  const ab = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
  if (descr === '<f4') return {type: 'float32', shape, data: new Float32Array(ab)};
  if (descr === '<i8') return {type: 'int64', shape, data: new BigInt64Array(ab)};
  throw new Error(`${file}: unsupported descr ${descr}`);
}

// Reorders labels/boxes/scores of each image by descending score, then label, then box.
function canonicalize(t) {
  const get = (k) => (t[k].data !== undefined ? t[k].data : t[k]);
  const scores = get('scores'), labels = get('labels'), boxes = get('boxes');
  const per = (t.scores.shape || [1, scores.length])[1] || scores.length;
  for (let n = 0; n * per < scores.length; n++) {
    const idx = Array.from({length: per}, (_, i) => n * per + i);
    idx.sort((a, b) => scores[b] - scores[a] || Number(labels[a] - labels[b]) ||
             boxes[a * 4] - boxes[b * 4] || boxes[a * 4 + 1] - boxes[b * 4 + 1]);
    const s2 = idx.map((i) => scores[i]), l2 = idx.map((i) => labels[i]);
    const b2 = idx.flatMap((i) => [boxes[i * 4], boxes[i * 4 + 1], boxes[i * 4 + 2], boxes[i * 4 + 3]]);
    s2.forEach((v, i) => { scores[n * per + i] = v; });
    l2.forEach((v, i) => { labels[n * per + i] = v; });
    b2.forEach((v, i) => { boxes[n * per * 4 + i] = v; });
  }
}

async function main() {
  const dir = process.argv[2];
  let bad = 0;
  for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.onnx')).sort()) {
    const name = f.slice(0, -5);
    const session = await ort.InferenceSession.create(path.join(dir, f), {intraOpNumThreads: 2});
    const feeds = {};
    for (const input of session.inputNames) {
      const t = readNpy(path.join(dir, `${name}.input_${input}.npy`));
      feeds[input] = new ort.Tensor(t.type, t.data, t.shape);
    }
    const out = await session.run(feeds);
    const wants = {}, gots = {};
    for (const o of session.outputNames) {
      wants[o] = readNpy(path.join(dir, `${name}.output_${o}.npy`));
      gots[o] = out[o].data;
    }
    if (wants.labels && wants.boxes && wants.scores) {
      // DETR-style outputs: detections with equal scores may come out in either order
      // (TopK ties); compare them sorted by (score, label, box).
      for (const src of [wants, gots]) canonicalize(src);
    }
    for (const o of session.outputNames) {
      const want = wants[o];
      const got = gots[o];
      let maxd = 0, lo = Infinity, hi = -Infinity;
      for (let i = 0; i < want.data.length; i++) {
        const w = Number(want.data[i]), g = Number(got[i]);
        maxd = Math.max(maxd, Math.abs(w - g));
        lo = Math.min(lo, w);
        hi = Math.max(hi, w);
      }
      const tol = want.type === 'int64' ? 0 : 1e-3 * Math.max(1, hi - lo);
      const ok = maxd <= tol;
      if (!ok) bad++;
      console.log(`${name} ${o} [${want.shape}] max|diff| ${maxd.toExponential(2)} ${ok ? 'ok' : 'MISMATCH'}`);
    }
  }
  process.exit(bad ? 1 : 0);
}
main().catch((e) => { console.error(e); process.exit(1); });
