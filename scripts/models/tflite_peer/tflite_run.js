// Runs a .tflite file on TensorFlow Lite (the WebAssembly build of its C++ interpreter from
// @tensorflow/tfjs-tflite, single-threaded, no SIMD) and writes every output's raw bytes.
//   node tflite_run.js PEER_DIR MODEL.tflite OUT_DIR [INPUT.bin ...]
// Inputs are raw little-endian bytes in the model's input order (sizes must match);
// OUT_DIR/<index>.bin gets output <index>; stdout: one JSON line with the inputs' and
// outputs' names, types and shapes.
'use strict';
const fs = require('fs');
const path = require('path');
const [peer, model, outDir, ...inputs] = process.argv.slice(2);
const wasmDir = path.join(peer, 'node_modules/@tensorflow/tfjs-tflite/wasm');
const factory = require(path.resolve(wasmDir, 'tflite_web_api_cc.js'));
(async () => {
  const mod = await factory({
    wasmBinary: fs.readFileSync(path.join(wasmDir, 'tflite_web_api_cc.wasm')),
    print: () => {}, printErr: () => {},
  });
  const bytes = new Uint8Array(fs.readFileSync(model));
  const at = mod._malloc(bytes.length);
  mod.HEAPU8.set(bytes, at);
  const created = mod.TFLiteWebModelRunner.CreateFromBufferAndOptions(
      at, bytes.length, {numThreads: 1, enableProfiling: false, maxProfilingBufferEntries: 1024});
  if (!created.ok()) throw new Error(`${model}: TFLite refused the model: ${created.errorMessage()}`);
  const runner = created.value();
  const describe = (t) => ({name: t.name, type: t.dataType, shape: String(t.shape).split(',').map(Number)});
  const ins = runner.GetInputs();
  if (ins.size() !== inputs.length) throw new Error(`${model}: ${ins.size()} inputs, ${inputs.length} files given`);
  const result = {inputs: [], outputs: []};
  for (let i = 0; i < ins.size(); ++i) {
    const t = ins.get(i);
    const view = t.data();
    const src = fs.readFileSync(inputs[i]);
    if (src.length !== view.byteLength) throw new Error(`${inputs[i]}: ${src.length} bytes, input ${t.name} needs ${view.byteLength}`);
    new Uint8Array(view.buffer, view.byteOffset, view.byteLength).set(src);
    result.inputs.push(describe(t));
  }
  if (!runner.Infer()) throw new Error(`${model}: inference failed`);
  fs.mkdirSync(outDir, {recursive: true});
  const outs = runner.GetOutputs();
  for (let i = 0; i < outs.size(); ++i) {
    const t = outs.get(i);
    const view = t.data();
    fs.writeFileSync(path.join(outDir, `${i}.bin`), Buffer.from(view.buffer, view.byteOffset, view.byteLength));
    result.outputs.push(describe(t));
  }
  console.log(JSON.stringify(result));
})().catch((e) => { console.error(String(e.message || e)); process.exit(1); });
