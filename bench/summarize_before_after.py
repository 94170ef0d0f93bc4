#!/usr/bin/python3
"""The table of bench/run_before_after.sh: per model, backend and thread count, each build's
median over rounds of its per-round median, and its fastest run over all rounds (the least
disturbed by other tenants of a shared machine); after / before of both. The spread column
is the largest per-round after / before (of medians) minus the smallest: how much the same
comparison moved between rounds on this machine, the noise a difference has to exceed.
Usage: bench/summarize_before_after.py results.jsonl"""
import collections
import json
import statistics
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(lambda: collections.defaultdict(dict))
for r in rows:
    by[(r["model"], r["backend"], r["threads"])][r["round"]][r["build"]] = r
print("| model | backend | threads | median ms before / after | ratio | min ms before / after | ratio | spread |")
print("|---|---|---|---|---|---|---|---|")
med_ratios, min_ratios = [], []
for (model, backend, threads), rounds in by.items():
    done = [v for v in rounds.values() if "before" in v and "after" in v]
    b = statistics.median(v["before"]["median_ms"] for v in done)
    a = statistics.median(v["after"]["median_ms"] for v in done)
    bm = min(v["before"]["min_ms"] for v in done)
    am = min(v["after"]["min_ms"] for v in done)
    per = [v["after"]["median_ms"] / v["before"]["median_ms"] for v in done]
    med_ratios.append(a / b)
    min_ratios.append(am / bm)
    print(f"| {model} | {backend} | {threads} | {b:.1f} / {a:.1f} | {a / b:.3f} | {bm:.1f} / {am:.1f} | {am / bm:.3f} | {max(per) - min(per):.3f} |")
print(f"\ngeometric mean after / before over {len(med_ratios)} cases: medians {statistics.geometric_mean(med_ratios):.3f}, "
      f"minima {statistics.geometric_mean(min_ratios):.3f}")
