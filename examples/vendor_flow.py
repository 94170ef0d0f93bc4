#!/usr/bin/env python3
"""The vendor toolkit's flow with rkdeploy: load -> quantize on photos -> evaluate against the
float model -> compile -> run on the NPU simulator (docs/python.md maps each call).

    vendor_flow.py MODEL PHOTOS_DIR PHOTO [--config CFG.json] [--eval EVAL_DIR] [--method M]
                   [--out DIR] [--backend sim|device]

MODEL: a float detector (ONNX, TFLite or TF.js model.json); PHOTOS_DIR: its photos; PHOTO: the
photo detected at the end; CFG: its detector config (docs/detector-config.md). The int8 model is
judged on photos it was not calibrated on: EVAL_DIR, or else every fourth photo of PHOTOS_DIR
(in name order) is held out of calibration for it. M: how activation ranges are chosen (minmax,
as `rkdeploy quantize`; percentile, kl, mse). Writes DIR/model.qdq.onnx and DIR/model.rkd (and,
for a split, DIR/calib and DIR/eval: links to the photos).
"""
import argparse
import os
import sys

import rkdeploy


PHOTO_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp")


def split_photos(photos, eval_dir, out):
    """(calibration folder, evaluation folder): PHOTOS_DIR and EVAL_DIR, or PHOTOS_DIR split into
    OUT/calib and OUT/eval (symbolic links), every fourth photo in name order held out."""
    if eval_dir:
        return photos, eval_dir
    names = sorted(f for f in os.listdir(photos) if f.lower().endswith(PHOTO_EXTENSIONS))
    if len(names) < 2:
        sys.exit(f"vendor_flow: {photos}: {len(names)} photo(s); holding some out of calibration needs 2 or more (or give --eval)")
    held = set(names[3::4] or names[-1:])
    calib, held_out = os.path.join(out, "calib"), os.path.join(out, "eval")
    for folder, members in ((calib, [n for n in names if n not in held]), (held_out, sorted(held))):
        os.makedirs(folder, exist_ok=True)
        for n in members:
            link = os.path.join(folder, n)
            if not os.path.lexists(link):
                os.symlink(os.path.abspath(os.path.join(photos, n)), link)
    print(f"photos: {len(names) - len(held)} to calibrate on, {len(held)} held out to judge the int8 model")
    return calib, held_out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("photos")
    ap.add_argument("photo")
    ap.add_argument("--config")
    ap.add_argument("--eval", help="photos to judge the int8 model on (default: a quarter of PHOTOS_DIR held out)")
    ap.add_argument("--method", default="minmax", choices=["minmax", "percentile", "kl", "mse"])
    ap.add_argument("--out", default=".")
    ap.add_argument("--backend", default="sim", choices=["sim", "device"])
    a = ap.parse_args()
    qdq = os.path.join(a.out, "model.qdq.onnx")
    rkd = os.path.join(a.out, "model.rkd")
    calib, held_out = split_photos(a.photos, a.eval, a.out)

    # rknn.load_onnx(): the float model, and what it detects.
    model = rkdeploy.load(a.model)
    print("inputs:", ", ".join(f"{i.name} {i.dtype}{list(i.shape)}" for i in model.inputs))
    print("float:", len(model.detect(a.photo, a.config)), "detection(s)")

    # rknn.build(do_quantization=True, dataset=...): int8, calibrated on the photos.
    def progress(stage, done, total):
        if done == total:
            print(f"  {stage}: {total} done", file=sys.stderr)

    q = rkdeploy.quantize(a.model, calib, qdq, config=a.config, method=a.method, progress=progress)
    print(f"quantized ({a.method}): {q['quantized_activations']} activations, {q['quantized_weights']} weights on {q['samples']} photo(s)")

    # rknn.accuracy_analysis(): judged on detections, the float model's as ground truth, on photos
    # the calibration did not see.
    e = rkdeploy.evaluate(qdq, held_out, reference=a.model, config=a.config, backend="sim")
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
