#!/usr/bin/python3
"""The table of bench/run_before_after.sh: per model, backend and thread count, the median
over rounds of each build's per-round median, and after / before. The spread column is the
largest per-round after / before ratio minus the smallest: how much the same comparison moved
between rounds on this machine (the noise a difference has to exceed).
Usage: bench/summarize_before_after.py results.jsonl"""
import collections
import json
import statistics
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(lambda: collections.defaultdict(dict))
for r in rows:
    by[(r["model"], r["backend"], r["threads"])][r["round"]][r["build"]] = r["median_ms"]
print("| model | backend | threads | before ms | after ms | after / before | round-to-round spread |")
print("|---|---|---|---|---|---|---|")
ratios = []
for (model, backend, threads), rounds in by.items():
    done = [v for v in rounds.values() if "before" in v and "after" in v]
    b = statistics.median(v["before"] for v in done)
    a = statistics.median(v["after"] for v in done)
    per = [v["after"] / v["before"] for v in done]
    ratios.append(a / b)
    print(f"| {model} | {backend} | {threads} | {b:.1f} | {a:.1f} | {a / b:.3f} | {max(per) - min(per):.3f} |")
print(f"\ngeometric mean after / before over {len(ratios)} cases: {statistics.geometric_mean(ratios):.3f}")
