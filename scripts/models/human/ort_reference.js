// Runs an ONNX model with ONNX Runtime (onnxruntime-node from bench/peers, default graph
// optimizations) on .npy inputs and writes every output as OUT_DIR/<name>.npy, the name made
// file-safe like rkdeploy's (/ \ : replaced by _):
//   node ort_reference.js MODEL.onnx OUT_DIR NAME=INPUT.npy ...
'use strict';
const path = require('path');
const fs = require('fs');
const ort = require(path.join(__dirname, '..', '..', '..', 'bench', 'peers', 'node_modules', 'onnxruntime-node'));

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const hlen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + hlen);
  const descr = /'descr': '([^']+)'/.exec(header)[1];
  const shape = /'shape': \(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const d = buf.subarray(10 + hlen);
  const ab = d.buffer.slice(d.byteOffset, d.byteOffset + d.byteLength);
  if (descr === '<f4') return new ort.Tensor('float32', new Float32Array(ab), shape);
  if (descr === '<i4') return new ort.Tensor('int32', new Int32Array(ab), shape);
  if (descr === '<i8') return new ort.Tensor('int64', new BigInt64Array(ab), shape);
  throw new Error(`${file}: unsupported descr ${descr}`);
}

function writeNpy(file, t) {
  const descr = {float32: '<f4', int32: '<i4', int64: '<i8', int8: '|i1', uint8: '|u1'}[t.type];
  if (!descr) throw new Error(`${file}: unsupported output type ${t.type}`);
  const shp = t.dims.length === 1 ? `(${t.dims[0]},)` : `(${t.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shp}, }`;
  while ((10 + header.length + 1) % 64 !== 0) header += ' ';
  header += '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

async function main() {
  const [model, outDir, ...specs] = process.argv.slice(2);
  const feeds = {};
  for (const s of specs) {
    const eq = s.indexOf('=');
    feeds[s.slice(0, eq)] = readNpy(s.slice(eq + 1));
  }
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 1});
  const out = await session.run(feeds);
  fs.mkdirSync(outDir, {recursive: true});
  for (const [name, t] of Object.entries(out)) writeNpy(path.join(outDir, name.replace(/[\\/:]/g, '_') + '.npy'), t);
}
main().catch((e) => { console.error(e); process.exit(1); });
