#!/usr/bin/env python3
"""The vendor toolkit's flow with rkdeploy: load -> quantize on photos -> evaluate against the
float model -> compile -> run on the NPU simulator (docs/python.md maps each call).

    vendor_flow.py MODEL PHOTOS_DIR PHOTO [--config CFG.json] [--out DIR] [--backend sim|device]

MODEL: a float detector (ONNX, TFLite or TF.js model.json); PHOTOS_DIR: calibration photos
(also the evaluation set); PHOTO: the photo detected at the end; CFG: its detector config
(docs/detector-config.md). Writes DIR/model.qdq.onnx and DIR/model.rkd.
"""
import argparse
import os
import sys

import rkdeploy


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("photos")
    ap.add_argument("photo")
    ap.add_argument("--config")
    ap.add_argument("--out", default=".")
    ap.add_argument("--backend", default="sim", choices=["sim", "device"])
    a = ap.parse_args()
    qdq = os.path.join(a.out, "model.qdq.onnx")
    rkd = os.path.join(a.out, "model.rkd")

    # rknn.load_onnx(): the float model, and what it detects.
    model = rkdeploy.load(a.model)
    print("inputs:", ", ".join(f"{i.name} {i.dtype}{list(i.shape)}" for i in model.inputs))
    print("float:", len(model.detect(a.photo, a.config)), "detection(s)")

    # rknn.build(do_quantization=True, dataset=...): int8, calibrated on the photos.
    def progress(stage, done, total):
        if done == total:
            print(f"  {stage}: {total} done", file=sys.stderr)

    q = rkdeploy.quantize(a.model, a.photos, qdq, config=a.config, method="percentile", progress=progress)
    print(f"quantized: {q['quantized_activations']} activations, {q['quantized_weights']} weights on {q['samples']} photo(s)")

    # rknn.accuracy_analysis(): judged on detections, the float model's as ground truth.
    e = rkdeploy.evaluate(qdq, a.photos, reference=a.model, config=a.config, backend="sim")
    m = e["metrics"]
    print(f"int8 on the NPU simulator vs float: AP50 {m['AP50']:.3f}, AP {m['AP']:.3f}, "
          f"{e['matched50']} of {e['ground_truth']['boxes']} float detections matched on {e['images']} photo(s)")

    # rknn.export_rknn(): one artifact an application on the board loads.
    c = rkdeploy.compile(qdq, rkd, config=a.config)
    print(f"compiled: {c['npu_nodes']} node(s) on the NPU, {c['cpu_nodes']} on the CPU, {c['file_bytes']} bytes")

    # rknn.init_runtime() + rknn.inference(): the artifact through the embeddable runtime.
    rt = rkdeploy.Runtime(rkd, backend=a.backend)
    for d in rt.detect(a.photo):
        print(f"{d.name or d.label} {d.score:.3f} [{d.x0:.0f} {d.y0:.0f} {d.x1:.0f} {d.y1:.0f}]")


if __name__ == "__main__":
    try:
        main()
    except rkdeploy.Error as err:
        sys.exit(f"vendor_flow: {err.kind}: {err}")
