#!/usr/bin/python3
"""Turns bench/run_bench.sh's results into the Markdown tables of BENCHMARKS.md.
Ratios = peer median / rkdeploy median, both measured in the same run. rkdeploy's
figure is the lower of its two medians (before and after the peers), the drift between
the two is printed so that a noisy run is visible."""
import json
import os
import sys


def load_gbench(path):
    rows = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        rows[b["run_name"]] = b
    return rows


def main():
    d = sys.argv[1]
    a, b = load_gbench(os.path.join(d, "rkdeploy.json")), load_gbench(os.path.join(d, "rkdeploy2.json"))
    peers = {}
    for f in ("torch.jsonl", "ort.jsonl"):
        for line in open(os.path.join(d, f)):
            r = json.loads(line)
            peers[(r["peer"].split("-")[0], r["case"], r["threads"])] = r
    ort_overhead = {t: peers.get(("onnxruntime", "binding_overhead/identity", t), {}).get("median_us") for t in (1, 2)}

    def ours(name):
        x, y = a[name], b[name]
        return min(x["real_time"], y["real_time"]), max(x["real_time"], y["real_time"]) / min(x["real_time"], y["real_time"]) - 1, x

    print("| case | threads | rkdeploy us | drift | PyTorch us | ratio | ONNX Runtime us | ratio | bytes touched | DRAM bound us |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    cases = []
    for lvl in range(3):
        for t in (1, 2):
            cases.append((f"BM_GridSample/level:{lvl}/threads:{t}/mode:0/real_time", f"grid_sample/level{lvl}/bilinear", t,
                          f"GridSample level {lvl} bilinear"))
    for t in (1,):
        cases.append((f"BM_GridSample/level:0/threads:{t}/mode:1/real_time", "grid_sample/level0/nearest", t,
                      "GridSample level 0 nearest"))
    for t in (1, 2):
        cases.append((f"BM_DeformAttnLayer/threads:{t}/method:0/real_time", "deform_attn_layer/default", t,
                      "fused decoder layer, default (vs three-call path)"))
        cases.append((f"BM_DeformAttnLayer/threads:{t}/method:1/real_time", "deform_attn_layer/discrete", t,
                      "fused decoder layer, discrete"))
    for t in (1, 2):
        cases.append((f"BM_DecoderSamplingForward/threads:{t}/real_time", "decoder_sampling_forward/default", t,
                      "decoder sampling per forward (prepare + 4 fused layers vs 4 three-call paths = 12 GridSample)"))
    for gname, pcase, t, label in cases:
        if gname not in a or gname not in b:
            continue
        us, drift, row = ours(gname)
        pt = peers.get(("pytorch", pcase, t))
        ort = peers.get(("onnxruntime", pcase, t))
        pt_s = f"{pt['median_us']:.0f} | {pt['median_us'] / us:.1f}x" if pt else "- | -"
        ort_s = f"{ort['median_us']:.0f} | {ort['median_us'] / us:.1f}x" if ort else "- | -"
        bound = row.get("bound_us", 0)
        traffic = f"{row['bytes_touched'] / 1e6:.2f} MB | {bound:.0f}" if row.get("bytes_touched") else "- | -"
        print(f"| {label} | {t} | {us:.0f} | {drift * 100:.0f}% | {pt_s} | {ort_s} | {traffic} |")
    print()
    bw = next(iter(a.values())).get("read_GBps", 0)
    print(f"DRAM bound = bytes touched / {bw:.1f} GB/s (read bandwidth measured by the benchmark binary on a 512 MiB buffer).")
    for t in (1, 2):
        if ort_overhead[t]:
            print(f"ONNX Runtime's Node binding overhead (an Identity model of the level-0 output size), {t} thread(s): "
                  f"{ort_overhead[t]:.0f} us median; it is included in the ONNX Runtime column.")


if __name__ == "__main__":
    main()
