#!/usr/bin/python3
"""Per-op-type time of one warm single-thread run: rkdeploy's executor (--profile) next to
ONNX Runtime's profiler (bench/peers/ort_model_peer.js ... profile), for the reference
models. Op types are each runtime's own: ONNX Runtime fuses differently (SiLU runs as
QuickGelu, convolutions in NCHWc with ReorderInput/ReorderOutput around them, the
attention as FusedMatMul/Softmax), rkdeploy folds SiLU/ReLU into Conv and the decoder
sampling into MSDeformAttn. Usage: bench/compare_models.py BUILD_DIR [MODEL...]"""
import json
import os
import re
import subprocess
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build"
models = sys.argv[2:] or ["yolov8n_arch", "deimv2_s_arch", "deimv2_s_arch_discrete"]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for m in models:
    stem = os.path.join(build, "models", m)
    inputs = []
    for f in sorted(os.listdir(os.path.dirname(stem))):
        if f.startswith(m + ".input_") and f.endswith(".npy"):
            inputs += ["--input", f"{f[len(m) + 7:-4]}={os.path.join(os.path.dirname(stem), f)}"]
    r = subprocess.run([os.path.join(build, "src/cli/rkdeploy"), "run", stem + ".onnx", *inputs, "--threads", "1",
                        "--repeat", "6", "--profile", "--top", "100"], capture_output=True, text=True, check=True)
    ours, total = {}, 0.0
    for line in r.stdout.splitlines():
        mm = re.match(r"^(\w+)\s+(\d+)\s+([\d.]+)\s+[\d.]+%$", line)
        if mm:
            ours[mm.group(1)] = float(mm.group(3))
    tot = re.search(r"profile \(last run, \d+ nodes, ([\d.]+) ms\)", r.stdout)
    total = float(tot.group(1)) if tot else sum(ours.values())
    o = subprocess.run(["node", os.path.join(root, "bench/peers/ort_model_peer.js"), stem + ".onnx", "3", "profile"],
                       capture_output=True, text=True, check=True)
    prof = json.loads(o.stdout.strip().splitlines()[-1])
    theirs = prof["op_ms"]
    print(f"\n{m}: one warm run, 1 thread: rkdeploy {total:.1f} ms, ONNX Runtime {prof['run_ms']:.1f} ms "
          f"(ratio {total / prof['run_ms']:.2f})")
    print(f"  {'op type':<22}{'rkdeploy ms':>12}{'ORT ms':>10}")
    keys = sorted(set(ours) | set(theirs), key=lambda k: -max(ours.get(k, 0), theirs.get(k, 0)))
    for k in keys:
        a, b = ours.get(k), theirs.get(k)
        if max(a or 0, b or 0) < 0.5:
            continue
        print(f"  {k:<22}{'' if a is None else f'{a:.2f}':>12}{'' if b is None else f'{b:.2f}':>10}")
