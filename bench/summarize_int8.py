#!/usr/bin/python3
"""The int8 / NPU-simulator table of BENCHMARKS.md from bench/run_int8.sh's JSON lines.
Per model and thread count: each peer's median over rounds of its per-round median, and the
ratios (sim / ORT, sim / int8, int8 / ORT) taken within each round (the peers measured
minutes apart at most) and then their median over rounds, with their range when there is
more than one round, so that a noisy run is visible."""
import json
import statistics
import sys
from collections import defaultdict


def main():
    rows = defaultdict(dict)  # (model, threads) -> round -> peer -> ms
    order = []
    for path in sys.argv[1:]:
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            key = (r["model"], r["threads"])
            if key not in order:
                order.append(key)
            rows[key].setdefault(r.get("round", 1), {})[r["peer"]] = r["median_ms"]
    print("| model | threads | rkdeploy int8 ms | rkdeploy sim ms | ONNX Runtime ms | sim / ORT | sim / int8 | int8 / ORT |")
    print("|---|---|---|---|---|---|---|---|")
    for key in order:
        rounds = [p for p in rows[key].values() if {"rkdeploy-int8", "rkdeploy-sim", "onnxruntime"} <= p.keys()]
        if not rounds:
            continue
        med = {k: statistics.median(p[k] for p in rounds) for k in ("rkdeploy-int8", "rkdeploy-sim", "onnxruntime")}

        def ratio(a, b):
            v = [p[a] / p[b] for p in rounds]
            m = f"{statistics.median(v):.1f}"
            return m if len(v) == 1 else f"{m} ({min(v):.1f}-{max(v):.1f})"

        print(f"| {key[0]} | {key[1]} | {med['rkdeploy-int8']:.1f} | {med['rkdeploy-sim']:.1f} | {med['onnxruntime']:.1f} | "
              f"{ratio('rkdeploy-sim', 'onnxruntime')} | {ratio('rkdeploy-sim', 'rkdeploy-int8')} | {ratio('rkdeploy-int8', 'onnxruntime')} |")
    print(f"\n{len(sys.argv) - 1} file(s), rounds per row: {sorted({len(v) for v in rows.values()})}")


if __name__ == "__main__":
    main()
