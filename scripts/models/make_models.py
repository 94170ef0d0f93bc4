#!/usr/bin/python3
"""Builds rkdeploy's reference models with random weights (fixed seed), exports them to
ONNX the way DEIMv2's and Ultralytics' exporters do, and writes PyTorch's outputs for a
fixed input as golden .npy files. Run with Debian's interpreter (python3-torch):

  /usr/bin/python3 scripts/models/make_models.py OUT_DIR [--scale s|tiny] [--models deim,deim_discrete,yolo,zoo]

Writes OUT_DIR/<model>.onnx, OUT_DIR/<model>.input_<name>.npy and
OUT_DIR/<model>.output_<name>.npy. DEIM models: inputs `images` [N,3,S,S] float32 and
`orig_target_sizes` [N,2] int64 ([w, h] of the original image); outputs `labels`,
`boxes`, `scores`; opset 17; dynamic batch. The full-size files are large (tens of MB) and
are not committed: CI generates them, tests use --scale tiny. `zoo`: the vendor model zoo's
latency-table detectors as its exports cut them (yolo_zoo.py), OUT_DIR/zoo_<name>.onnx at 640
(the planner's calibration set, targets/measurements/rknn-model-zoo-2.3.2.json); --scale tiny
exports them at 320.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deim_arch import DEIMArch  # noqa: E402
from yolo_arch import YOLOv8Arch  # noqa: E402
from yolo_zoo import zoo_models  # noqa: E402


def fixed_image(size, seed=7):
    """A deterministic, image-like input in [0, 1]: smooth gradients plus blobs."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    img = torch.stack([xx, yy, 0.5 * (xx + yy)], 0)
    for _ in range(6):
        cx, cy, r = torch.rand(3, generator=g)
        blob = torch.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (0.02 + 0.05 * r))
        img = img + blob * torch.rand(3, 1, 1, generator=g)
    return (img / img.amax()).unsqueeze(0).contiguous()


def save(out, name, inputs, outputs):
    for k, v in inputs.items():
        np.save(os.path.join(out, f"{name}.input_{k}.npy"), v.numpy())
    for k, v in outputs.items():
        np.save(os.path.join(out, f"{name}.output_{k}.npy"), v.detach().numpy())


def export_deim(out, scale, method, name):
    torch.manual_seed(0)  # the same weights for both sampling methods
    model = DEIMArch(scale, method).eval()
    s = model.cfg.img
    images = fixed_image(s)
    sizes = torch.tensor([[s, s]], dtype=torch.int64)
    with torch.no_grad():
        labels, boxes, scores = model(images, sizes)
    # Exported with autograd enabled: under no_grad PyTorch 1.13 routes attention through its
    # fused fast path (aten::_native_multi_head_attention), which has no ONNX export.
    torch.onnx.export(model, (images, sizes), os.path.join(out, f"{name}.onnx"), opset_version=17,
                      input_names=["images", "orig_target_sizes"], output_names=["labels", "boxes", "scores"],
                      dynamic_axes={"images": {0: "N"}, "orig_target_sizes": {0: "N"}})
    save(out, name, {"images": images, "orig_target_sizes": sizes},
         {"labels": labels, "boxes": boxes, "scores": scores})
    print(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, input {s}x{s}")


def export_yolo(out, scale, name):
    torch.manual_seed(1)
    img = 640 if scale == "s" else 320
    model = YOLOv8Arch(80, img).eval()
    images = fixed_image(img)
    with torch.no_grad():
        y = model(images)
    torch.onnx.export(model, (images,), os.path.join(out, f"{name}.onnx"), opset_version=17,
                      input_names=["images"], output_names=["output0"], dynamic_axes={"images": {0: "N"}})
    save(out, name, {"images": images}, {"output0": y})
    print(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, input {img}x{img}")


def conv_macs(model, x):
    """Multiply-accumulates of every convolution and matrix product of one forward pass."""
    total = [0]

    def conv(m, inp, out):
        total[0] += out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]

    hooks = [m.register_forward_hook(conv) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return total[0]


def export_zoo(out, scale):
    img = 640 if scale == "s" else 320
    images = fixed_image(img)
    for name, (make, outputs) in zoo_models().items():
        torch.manual_seed(1)
        model = make().eval()
        with torch.no_grad():
            y = model(images)
        file = f"zoo_{name}" + ("" if scale == "s" else "_tiny")
        torch.onnx.export(model, (images,), os.path.join(out, f"{file}.onnx"), opset_version=17, input_names=["images"],
                          output_names=outputs, dynamic_axes={"images": {0: "N"}})
        save(out, file, {"images": images}, dict(zip(outputs, y)))
        print(f"{file}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, "
              f"{conv_macs(model, images) / 1e9:.2f} G convolution MACs, input {img}x{img}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--scale", default="s", choices=["s", "tiny"])
    ap.add_argument("--models", default="deim,deim_discrete,yolo")
    ap.add_argument("--quiet", action="store_true", help="silence the exporter's warnings")
    a = ap.parse_args()
    if a.quiet:
        import warnings
        warnings.filterwarnings("ignore")
    os.makedirs(a.out, exist_ok=True)
    suffix = "" if a.scale == "s" else "_tiny"
    for m in a.models.split(","):
        if m == "deim":
            export_deim(a.out, a.scale, "default", "deimv2_s_arch" + suffix)
        elif m == "deim_discrete":
            export_deim(a.out, a.scale, "discrete", "deimv2_s_arch_discrete" + suffix)
        elif m == "yolo":
            export_yolo(a.out, a.scale, "yolov8n_arch" + suffix)
        elif m == "zoo":
            export_zoo(a.out, a.scale)
        else:
            sys.exit(f"make_models.py: unknown model '{m}'")


if __name__ == "__main__":
    main()
