#!/usr/bin/env python3
"""Non-finite values through rkdeploy's float kernels, against PyTorch (docs/cli.md,
"Non-finite values").

Every case is a small PyTorch function on an input holding NaN, +inf and -inf, exported to
ONNX and run with `rkdeploy run --allow-nonfinite`. The NaN positions and every infinity
(position and sign) must match PyTorch exactly; finite values agree within model_agree
(tests/common/tolerance.h: |a - e| <= 2^-14 max|e|). Cases cover the fused paths
(Conv+ReLU and Conv+SiLU fused by conv-activation-fusion) and the same activations alone.
Without --allow-nonfinite the input is refused, naming it.

Usage: test_nonfinite.py RKDEPLOY
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

rk = sys.argv[1]
torch.manual_seed(0)
conv = torch.nn.Conv2d(4, 4, 1, bias=False).requires_grad_(False)
with torch.no_grad():
    conv.weight.copy_(torch.eye(4).reshape(4, 4, 1, 1) + 0.1)
conv3 = torch.nn.Conv2d(4, 2, 3, padding=1).requires_grad_(False)

CASES = {
    "conv_relu (fused)": lambda x: torch.relu(conv(x)),
    "conv_silu (fused)": lambda x: conv(x) * torch.sigmoid(conv(x)),
    "conv_clip": lambda x: torch.clamp(conv(x), 0.0, 6.0),
    "conv_leaky": lambda x: torch.nn.functional.leaky_relu(conv(x), 0.1),
    "conv_sigmoid": lambda x: torch.sigmoid(conv(x)),
    "conv3x3": lambda x: conv3(x),
    "relu": torch.relu,
    "clip": lambda x: torch.clamp(x, 0.0, 6.0),
    "relu6": torch.nn.functional.relu6,
    "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.1),
    "prelu": lambda x: torch.nn.functional.prelu(x, torch.full((4,), 0.25)),
    "sigmoid": torch.sigmoid,
    "hardsigmoid": torch.nn.functional.hardsigmoid,
    "hardswish": torch.nn.functional.hardswish,
    "tanh": torch.tanh,
    "gelu": torch.nn.functional.gelu,
    "erf": torch.erf,
    "exp": torch.exp,
    "softmax last axis": lambda x: torch.softmax(x, dim=-1),
    "softmax axis 1": lambda x: torch.softmax(x, dim=1),
    "log_softmax": lambda x: torch.log_softmax(x, dim=-1),
    "layer_norm": lambda x: torch.nn.functional.layer_norm(x, (4,)),
    "max_pool": lambda x: torch.nn.functional.max_pool2d(x, 2),
    "avg_pool": lambda x: torch.nn.functional.avg_pool2d(x, 2),
    "maximum": lambda x: torch.maximum(x, x.flip(3)),
    "minimum": lambda x: torch.minimum(x, x.flip(3)),
    "amax": lambda x: x.amax(dim=-1),
    "amin": lambda x: x.amin(dim=1),
    "mean": lambda x: x.mean(dim=(2, 3)),
    "sum": lambda x: x.sum(dim=1),
    "argmax": lambda x: torch.argmax(x, dim=-1),
    "topk": lambda x: torch.topk(x.flatten(1), 5)[0],
    "matmul": lambda x: x @ x.transpose(2, 3),
    "bilinear resize": lambda x: torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
    "grid_sample": lambda x: torch.nn.functional.grid_sample(x, torch.zeros(1, 2, 2, 2), align_corners=False),
}


class Wrap(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f, self.conv, self.conv3 = f, conv, conv3

    def forward(self, x):
        return self.f(x)


def agree(y, ref):
    if y.shape != ref.shape:
        return f"shape {y.shape} vs {ref.shape}"
    if not np.array_equal(np.isnan(y), np.isnan(ref)):
        return f"NaN at {np.argwhere(np.isnan(y) != np.isnan(ref)).tolist()[:4]} (ours {int(np.isnan(y).sum())}, PyTorch {int(np.isnan(ref).sum())})"
    inf = np.isinf(ref) | np.isinf(y)
    if not np.array_equal(y[inf], ref[inf]):
        return f"infinities differ at {np.argwhere(inf & (y != ref)).tolist()[:4]}"
    fin = np.isfinite(ref)
    if fin.any():
        bound = 2.0 ** -14 * max(float(np.abs(ref[fin]).max()), 1e-30)
        err = float(np.abs(y[fin].astype(np.float64) - ref[fin]).max())
        if err > bound:
            return f"finite values differ by {err:.3g} > {bound:.3g}"
    return None


def main():
    x = torch.randn(1, 4, 4, 4)
    x[0, 0, 1, 1] = float("nan")
    x[0, 1, 2, 2] = float("inf")
    x[0, 2, 3, 0] = -float("inf")
    x[0, 3, 0, 3] = float("nan")
    fails = 0
    with tempfile.TemporaryDirectory() as d:
        xp = os.path.join(d, "x.npy")
        np.save(xp, x.numpy())
        for i, (name, f) in enumerate(CASES.items()):
            m = os.path.join(d, f"m{i}.onnx")
            torch.onnx.export(Wrap(f), (x,), m, input_names=["x"], output_names=["y"], opset_version=16)
            with torch.no_grad():
                ref = f(x).numpy()
            out = os.path.join(d, f"o{i}")
            p = subprocess.run([rk, "run", m, "--input", f"x={xp}", "--output-dir", out, "--allow-nonfinite"], capture_output=True, text=True)
            problem = f"exit {p.returncode}: {p.stderr.strip()}" if p.returncode else agree(np.load(os.path.join(out, "y.npy")), ref)
            print(f"{'FAIL' if problem else 'ok  '} {name}{': ' + problem if problem else ''}")
            fails += problem is not None
        # Without the flag: refused, naming the input and the first element.
        p = subprocess.run([rk, "run", m, "--input", f"x={xp}"], capture_output=True, text=True)
        want = "input 'x': element [0, 0, 1, 1] is NaN (4 non-finite values in all)"
        if p.returncode != 2 or want not in p.stderr:
            print(f"FAIL refusal: exit {p.returncode}: {p.stderr.strip()}")
            fails += 1
    print(f"{len(CASES) + 1 - fails} passed, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
