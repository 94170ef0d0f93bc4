// Runs a TensorFlow.js graph model with TensorFlow.js itself (tfjs-core + the pure-JS CPU
// backend, installed by fetch.sh) on .npy inputs and writes every signature output as .npy:
//   node tfjs_reference.js MODULES_DIR MODEL.json OUT_DIR NAME=INPUT.npy ...
// Output files are named like rkdeploy's (`rkdeploy run --output-dir`): the tensor name with
// every / \ : and NUL replaced by '_'.
'use strict';
const fs = require('fs');
const path = require('path');

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const hlen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + hlen);
  const descr = /'descr': '([^']+)'/.exec(header)[1];
  const shape = /'shape': \(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const data = buf.subarray(10 + hlen);
  const ab = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
  if (descr === '<f4') return {dtype: 'float32', shape, data: new Float32Array(ab)};
  if (descr === '<i4') return {dtype: 'int32', shape, data: new Int32Array(ab)};
  throw new Error(`${file}: unsupported descr ${descr}`);
}

function writeNpy(file, shape, dtype, data) {
  const descr = dtype === 'int32' ? '<i4' : dtype === 'bool' ? '|b1' : '<f4';
  const shp = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shp}, }`;
  while ((10 + header.length + 1) % 64 !== 0) header += ' ';
  header += '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0; pre.writeUInt16LE(header.length, 8);
  const body = dtype === 'bool' ? Buffer.from(Uint8Array.from(data)) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

async function main() {
  const [modules, modelPath, outDir, ...specs] = process.argv.slice(2);
  const need = (m) => require(path.resolve(modules, 'node_modules', m));
  const tf = need('@tensorflow/tfjs-core');
  need('@tensorflow/tfjs-backend-cpu');
  const converter = need('@tensorflow/tfjs-converter');
  const j = JSON.parse(fs.readFileSync(modelPath));
  const dir = path.dirname(modelPath);
  const specsW = [], shards = [];
  for (const g of j.weightsManifest) {
    specsW.push(...g.weights);
    for (const p of g.paths) shards.push(fs.readFileSync(path.join(dir, p)));
  }
  const all = Buffer.concat(shards);
  const handler = {load: async () => ({modelTopology: j.modelTopology, weightSpecs: specsW, format: j.format,
    weightData: all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength),
    signature: j.signature, userDefinedMetadata: j.userDefinedMetadata})};
  await tf.setBackend('cpu');
  const model = await converter.loadGraphModel(handler);
  const feeds = {};
  for (const s of specs) {
    const [name, file] = s.split('=');
    const a = readNpy(file);
    feeds[name] = tf.tensor(a.data, a.shape, a.dtype);
  }
  const names = model.outputs.map((o) => o.name);
  const outs = await model.executeAsync(feeds, names);
  fs.mkdirSync(outDir, {recursive: true});
  (Array.isArray(outs) ? outs : [outs]).forEach((t, i) => {
    const safe = names[i].replace(/:0$/, '').replace(/[\\/:\0]/g, '_');
    writeNpy(path.join(outDir, safe + '.npy'), t.shape, t.dtype, t.dataSync());
  });
}
main().catch((e) => { console.error(e); process.exit(1); });
