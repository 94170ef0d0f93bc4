#!/usr/bin/python3
"""The Python package's cost over the command line: the same quantized model's forward pass
timed through rkdeploy.load(...).run / rkdeploy.Runtime(...).run and through `rkdeploy bench
--json`, in one process run after the other (BENCHMARKS.md, "The Python package").

    PYTHONPATH=build/python bench/python/binding_overhead.py RKDEPLOY QDQ_MODEL ARTIFACT.rkd INPUT.npy
"""
import json
import subprocess
import sys
import time

import numpy as np

import rkdeploy


def p50(f, runs=21):
    f()  # warm-up
    ms = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        ms.append((time.perf_counter() - t0) * 1e3)
    return sorted(ms)[len(ms) // 2]


def cli_p50(rk, model, backend, npy, name):
    out = subprocess.run([rk, "bench", model, "--backend", backend, "--input", f"{name}={npy}", "--runs", "21", "--warmup", "1", "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["forward_ms"]["p50"]


def main(rk, qdq, rkd, npy):
    x = np.load(npy)
    rows = []
    for backend in ("int8", "sim"):
        m = rkdeploy.load(qdq, backend=backend)
        rows.append((f"{backend}, Model.run", p50(lambda: m.run(x)), cli_p50(rk, qdq, backend, npy, m.inputs[0].name)))
    rt = rkdeploy.Runtime(rkd)
    rows.append(("sim .rkd, Runtime.run", p50(lambda: rt.run(x)), cli_p50(rk, rkd, "sim", npy, rt.inputs[0].name)))
    for what, py, cli in rows:
        print(f"{what:24s} Python P50 {py:7.2f} ms   rkdeploy bench P50 {cli:7.2f} ms   ratio {py / cli:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
