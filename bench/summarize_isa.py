#!/usr/bin/python3
"""The tables of BENCHMARKS.md's "Under ISA ceilings" from bench/run_isa.sh's JSON lines.
usage: summarize_isa.py isa.jsonl"""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
isas = list(dict.fromkeys(r["isa"] for r in rows if r["kind"] == "kernel" or r["peer"] != "onnxruntime"))
kern = {(r["name"], r["isa"]): r["median_us"] for r in rows if r["kind"] == "kernel"}
if kern:
    print("| kernel (1 thread) | " + " | ".join([f"{i} us" for i in isas] + [f"{i} / native" for i in isas[1:]]) + " |")
    print("|---" * (1 + 2 * len(isas) - 1) + "|")
    for name in dict.fromkeys(n for n, _ in kern):
        base = kern.get((name, "native"))
        cells = [f"{kern[(name, i)]:.1f}" if (name, i) in kern else "-" for i in isas]
        ratios = [f"{kern[(name, i)] / base:.2f}" if base and (name, i) in kern else "-" for i in isas[1:]]
        print(f"| {name} | " + " | ".join(cells + ratios) + " |")
    print()
models = [r for r in rows if r["kind"] == "model"]
ort = {r["model"]: r["median_ms"] for r in models if r["peer"] == "onnxruntime"}
ms = {(r["model"], r["peer"], r["isa"]): r["median_ms"] for r in models if r["peer"] != "onnxruntime"}
if ms:
    cols = [(p, i) for p in ("rkdeploy-int8", "rkdeploy-sim") for i in isas if any(k[1:] == (p, i) for k in ms)]
    print("| model (1 thread) | ONNX Runtime ms (native) | " + " | ".join(f"{p[9:]} {i} ms (/ ORT)" for p, i in cols) + " |")
    print("|---" * (2 + len(cols)) + "|")
    for m in dict.fromkeys(k[0] for k in ms):
        o = ort.get(m)
        cells = []
        for p, i in cols:
            v = ms.get((m, p, i))
            cells.append("-" if v is None else f"{v:.1f} ({v / o:.1f}x)" if o else f"{v:.1f}")
        print(f"| {m} | {o if o is not None else '-'} | " + " | ".join(cells) + " |")
