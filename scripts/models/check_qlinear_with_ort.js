// Runs DIR/qlinear_tiny.onnx and DIR/qdq_tiny.onnx (scripts/models/make_qlinear_model.py) with ONNX Runtime and
// rkdeploy's CPU executor on the stored input and requires bit-identical outputs (the int8
// path with ONNX Runtime's requantization). Usage: node check_qlinear_with_ort.js DIR RKDEPLOY
'use strict';
const path = require('path');
const fs = require('fs');
const os = require('os');
const {execFileSync} = require('child_process');
const ort = require(path.join(__dirname, '..', '..', 'bench', 'peers', 'node_modules', 'onnxruntime-node'));

function readNpyF32(file) {
  const buf = fs.readFileSync(file);
  const hlen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + hlen);
  const shape = /'shape': \(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  if (!/'descr': '<f4'/.test(header)) throw new Error(file + ': not float32');
  const data = buf.subarray(10 + hlen);
  return {shape, data: new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength))};
}

async function check(dir, rkd, name) {
  const model = path.join(dir, name + '.onnx');
  const input = path.join(dir, name + '.input_x.npy');
  const x = readNpyF32(input);
  const session = await ort.InferenceSession.create(model);
  const want = (await session.run({x: new ort.Tensor('float32', x.data, x.shape)})).y;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rkd-qlinear-'));
  execFileSync(rkd, ['run', model, '--backend', 'int8', '--input', 'x=' + input, '--output-dir', tmp]);
  const got = readNpyF32(path.join(tmp, 'y.npy'));
  if (got.shape.join(',') !== want.dims.join(',')) throw new Error(`shape ${got.shape} vs ${want.dims}`);
  let diff = 0;
  for (let i = 0; i < got.data.length; i++) diff += got.data[i] !== want.data[i] ? 1 : 0;
  console.log(`${name}: ${got.data.length - diff}/${got.data.length} outputs bit-identical to ONNX Runtime ${require(path.join(__dirname, '..', '..', 'bench', 'peers', 'node_modules', 'onnxruntime-node', 'package.json')).version}`);
  return diff === 0;
}

async function main() {
  const [dir, rkd] = process.argv.slice(2);
  let ok = true;
  for (const name of ['qlinear_tiny', 'qdq_tiny']) ok = (await check(dir, rkd, name)) && ok;
  process.exit(ok ? 0 : 1);
}
main().catch((e) => { console.error(e); process.exit(1); });
