// ONNX Runtime peer for bench/run_bench.sh (onnxruntime-node 1.30, CPU provider): times
// GridSample-16 at the DEIMv2-S decoder shapes, the unfused decoder sampling subgraph, and
// an Identity model of the level-0 output size (the Node binding's own overhead, reported
// separately so that it can be subtracted). Usage: node ort_peer.js MODEL_DIR
// Prints one JSON object per line: {"peer", "case", "threads", "median_us", "p95_us"}.
'use strict';
const ort = require('onnxruntime-node');
const path = require('path');

const HEADS = 8, HD = 24, LQ = 300;
const SHAPES = [[80, 80], [40, 40], [20, 20]];
const POINTS = [3, 6, 3];

function uniform(n, lo, hi, seed) {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = lo + (hi - lo) * (s / 4294967296);
  }
  return a;
}

async function timeit(session, feeds, minMs = 500, minRuns = 20) {
  // `session` is an InferenceSession or any object whose run(feeds) returns a promise.
  for (let i = 0; i < 5; i++) await session.run(feeds);
  const times = [];
  const start = process.hrtime.bigint();
  while (times.length < minRuns || Number(process.hrtime.bigint() - start) / 1e6 < minMs) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t) / 1e3);
  }
  times.sort((a, b) => a - b);
  return [times[Math.floor(times.length / 2)], times[Math.floor(times.length * 0.95)]];
}

function emit(c, threads, [med, p95]) {
  console.log(JSON.stringify({peer: 'onnxruntime-' + require('onnxruntime-node/package.json').version, case: c,
                              threads, median_us: +med.toFixed(2), p95_us: +p95.toFixed(2)}));
}

async function main() {
  const dir = process.argv[2];
  for (const threads of [1, 2]) {
    const opts = {intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential'};
    const ident = await ort.InferenceSession.create(path.join(dir, 'identity.onnx'), opts);
    emit('binding_overhead/identity', threads,
         await timeit(ident, {x: new ort.Tensor('float32', uniform(HEADS * HD * LQ * 3, -1, 1, 9), [HEADS, HD, LQ, 3])}));
    for (let l = 0; l < 3; l++) {
      const [h, w] = SHAPES[l];
      const s = await ort.InferenceSession.create(path.join(dir, `grid_sample_level${l}.onnx`), opts);
      const feeds = {
        x: new ort.Tensor('float32', uniform(HEADS * HD * h * w, -1, 1, 1 + l), [HEADS, HD, h, w]),
        grid: new ort.Tensor('float32', uniform(HEADS * LQ * POINTS[l] * 2, -1, 1, 5 + l), [HEADS, LQ, POINTS[l], 2]),
      };
      emit(`grid_sample/level${l}/bilinear`, threads, await timeit(s, feeds));
    }
    const tokens = SHAPES.reduce((a, [h, w]) => a + h * w, 0);
    const core = await ort.InferenceSession.create(path.join(dir, 'deform_attn_default.onnx'), opts);
    const wts = uniform(LQ * HEADS * 12, 0, 1 / 6, 13);
    const layerFeeds = (seed) => ({
      value: new ort.Tensor('float32', uniform(tokens * HEADS * HD, -1, 1, 11), [1, tokens, HEADS, HD]),
      locations: new ort.Tensor('float32', uniform(LQ * HEADS * 12 * 2, 0, 1, seed), [1, LQ, HEADS, 12, 2]),
      weights: new ort.Tensor('float32', wts, [1, LQ, HEADS, 12]),
    });
    emit('deform_attn_layer/default', threads, await timeit(core, layerFeeds(12)));
    // A forward's sampling: the subgraph run once per decoder layer (4 layers).
    const feeds4 = [12, 13, 14, 15].map(layerFeeds);
    const forward = {run: async () => { for (const f of feeds4) await core.run(f); }};
    emit('decoder_sampling_forward/default', threads, await timeit(forward, null));
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
