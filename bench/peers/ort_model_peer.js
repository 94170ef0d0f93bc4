// Whole-model ONNX Runtime peer for bench/run_models.sh: runs MODEL.onnx with the inputs
// MODEL.input_<name>.npy (written by scripts/models/make_models.py; <name> URI-encoded when it
// holds '/') at 1 and 2 intra-op
// threads and prints one JSON line per thread count: {"peer", "model", "threads",
// "median_ms", "min_ms", "rss_mb"} (rss after the timed runs).
// With a third argument `profile`: one more single-thread session with ONNX Runtime's
// profiler on, and one JSON line {"peer", "model", "op_ms": {op type: ms}} for the last of
// 3 profiled runs (kernel times; the executor's --profile gives rkdeploy's).
// Usage: node ort_model_peer.js MODEL.onnx RUNS [profile]
'use strict';
const ort = require('onnxruntime-node');
const fs = require('fs');
const path = require('path');

function readNpy(file) {
  const b = fs.readFileSync(file);
  const hlen = b.readUInt16LE(8);
  const header = b.slice(10, 10 + hlen).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').filter((s) => s.trim()).map((s) => +s);
  const data = b.slice(10 + hlen);
  const ab = data.buffer.slice(data.byteOffset, data.byteOffset + data.length);
  if (descr === '<f4') return new ort.Tensor('float32', new Float32Array(ab), shape);
  if (descr === '<i8') return new ort.Tensor('int64', new BigInt64Array(ab), shape);
  if (descr === '<i4') return new ort.Tensor('int32', new Int32Array(ab), shape);
  throw new Error(file + ': dtype ' + descr);
}

async function main() {
  const [model, runsArg] = process.argv.slice(2);
  const runs = +(runsArg || 10);
  const stem = model.replace(/\.onnx$/, '');
  const dir = path.dirname(model), base = path.basename(stem);
  const feeds = {};
  for (const f of fs.readdirSync(dir)) {
    if (f.startsWith(base + '.input_') && f.endsWith('.npy')) feeds[decodeURIComponent(f.slice(base.length + 7, -4))] = readNpy(path.join(dir, f));
  }
  for (const threads of [1, 2]) {
    const s = await ort.InferenceSession.create(model, {intraOpNumThreads: threads, interOpNumThreads: 1});
    await s.run(feeds);
    const t = [];
    for (let i = 0; i < runs; i++) {
      const t0 = process.hrtime.bigint();
      await s.run(feeds);
      t.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    t.sort((a, b) => a - b);
    console.log(JSON.stringify({peer: 'onnxruntime-' + require('onnxruntime-node/package.json').version, model: base, threads,
                                median_ms: +t[Math.floor(t.length / 2)].toFixed(2), min_ms: +t[0].toFixed(2),
                                rss_mb: +(process.memoryUsage().rss / 1e6).toFixed(1)}));
  }
  if (process.argv[4] === 'profile') await profileOps(model, feeds, base);
}
async function profileOps(model, feeds, base) {
  const s = await ort.InferenceSession.create(model, {intraOpNumThreads: 1, interOpNumThreads: 1, enableProfiling: true,
                                                      profileFilePrefix: '/tmp/ort_profile_' + base});
  for (let i = 0; i < 3; i++) await s.run(feeds);
  await s.endProfiling();
  await s.release();
  // The binding does not return the file name: take the newest file with our prefix.
  const prefix = 'ort_profile_' + base + '_';
  const files = fs.readdirSync('/tmp').filter((f) => f.startsWith(prefix)).map((f) => path.join('/tmp', f));
  files.sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  const file = files[0];
  const events = JSON.parse(fs.readFileSync(file, 'utf8'));
  fs.unlinkSync(file);
  // Kernel events of the last run: after the last "model_run" start.
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
  const last = runs[runs.length - 1];
  const ops = {};
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || e.ts < last.ts) continue;
    const op = e.args && e.args.op_name ? e.args.op_name : 'unknown';
    ops[op] = (ops[op] || 0) + e.dur / 1000;
  }
  for (const k of Object.keys(ops)) ops[k] = +ops[k].toFixed(3);
  console.log(JSON.stringify({peer: 'onnxruntime-' + require('onnxruntime-node/package.json').version, model: base,
                              run_ms: +(last.dur / 1000).toFixed(2), op_ms: ops}));
}

main().catch((e) => { console.error(e); process.exit(1); });
