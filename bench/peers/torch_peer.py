#!/usr/bin/python3
"""PyTorch peer for bench/run_bench.sh: times F.grid_sample at the DEIMv2-S decoder shapes
and the decoder's three-call sampling core (one grid_sample per level, concat, weight,
sum), at 1 and 2 threads. Prints one JSON object per line: {"peer", "case", "threads",
"median_us", "p95_us"}. Run with Debian's interpreter: /usr/bin/python3."""
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gen_golden import msda_decoder  # noqa: E402  (the same decoder function the golden tests use)

HEADS, HD, LQ = 8, 24, 300
SHAPES = [(80, 80), (40, 40), (20, 20)]
POINTS = [3, 6, 3]


def timeit(fn, min_time=0.5, min_runs=20):
    for _ in range(5):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - start < min_time:
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e6)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.95)]


def emit(case, threads, med, p95):
    print(json.dumps({"peer": "pytorch-" + torch.__version__.split("+")[0], "case": case, "threads": threads,
                      "median_us": round(med, 2), "p95_us": round(p95, 2)}), flush=True)


def main():
    rng = np.random.default_rng(0)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        with torch.no_grad():
            for lvl, (h, w) in enumerate(SHAPES):
                x = torch.from_numpy(rng.uniform(-1, 1, (HEADS, HD, h, w)).astype(np.float32))
                g = torch.from_numpy(rng.uniform(-1, 1, (HEADS, LQ, POINTS[lvl], 2)).astype(np.float32))
                for mode in ("bilinear", "nearest"):
                    med, p95 = timeit(lambda: F.grid_sample(x, g, mode=mode, padding_mode="zeros", align_corners=False))
                    emit(f"grid_sample/level{lvl}/{mode}", threads, med, p95)
            tokens = sum(h * w for h, w in SHAPES)
            value = torch.from_numpy(rng.uniform(-1, 1, (1, tokens, HEADS, HD)).astype(np.float32))
            loc = torch.from_numpy(rng.uniform(0, 1, (1, LQ, HEADS, 12, 2)).astype(np.float32))
            wts = torch.softmax(torch.from_numpy(rng.standard_normal((1, LQ, HEADS, 12)).astype(np.float32)), -1)
            for method in ("default", "discrete"):
                med, p95 = timeit(lambda: msda_decoder(value, SHAPES, loc, wts, POINTS, method))
                emit(f"deform_attn_layer/{method}", threads, med, p95)
            # A forward's sampling: 4 decoder layers, each with its own locations and weights.
            locs = [torch.from_numpy(rng.uniform(0, 1, (1, LQ, HEADS, 12, 2)).astype(np.float32)) for _ in range(4)]

            def forward():
                for lo in locs:
                    msda_decoder(value, SHAPES, lo, wts, POINTS, "default")
            med, p95 = timeit(forward)
            emit("decoder_sampling_forward/default", threads, med, p95)


if __name__ == "__main__":
    main()
