#!/usr/bin/python3
"""Writes the PyTorch golden fixtures used by tests/kernels (committed under tests/data/golden).

Run with Debian's interpreter (python3-torch): /usr/bin/python3 scripts/gen_golden.py
Each .npz holds the inputs, the options and PyTorch's output; the C++ tests recompute the
output with rkdeploy's kernels and compare (tests/common/tolerance.h).
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from deim_sampling import msda_decoder  # noqa: F401  (re-exported for the peers)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "golden")
MODES = ["bilinear", "nearest", "bicubic"]
PADS = ["zeros", "border", "reflection"]


def adversarial_grid(rng, n, ho, wo, rank, special):
    """Uniform points in [-1.3, 1.3] mixed with exact centres, corners, half-pixel and
    far-outside coordinates, and (if special) NaN and +-inf."""
    g = rng.uniform(-1.3, 1.3, size=(n, ho, wo, rank) if rank == 2 else (n, 2, ho, wo, rank)).astype(np.float32)
    flat = g.reshape(-1)
    picks = [-1.0, 1.0, 0.0, -0.5, 0.5, 1.0 + 1e-7, -1.0 - 1e-7, 3.0, -7.25, 1e4, -1e4]
    if special:
        picks += [np.nan, np.inf, -np.inf]
    idx = rng.choice(flat.size, size=min(flat.size // 3, 4 * len(picks)), replace=False)
    for j, i in enumerate(idx):
        flat[i] = picks[j % len(picks)]
    return g


def gen_grid_sample(rng):
    cases = {}
    shapes2 = [(1, 1, 1, 1), (1, 2, 1, 5), (2, 3, 3, 2), (1, 2, 5, 7), (2, 1, 7, 5), (1, 3, 16, 17), (1, 2, 4, 33)]
    k = 0
    for (n, c, h, w) in shapes2:
        for mode in MODES:
            for pad in PADS:
                for ac in (0, 1):
                    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
                    ho, wo = (3, 4) if k % 2 else (5, 3)
                    g = adversarial_grid(rng, n, ho, wo, 2, special=True)
                    y = F.grid_sample(torch.from_numpy(x), torch.from_numpy(g), mode=mode, padding_mode=pad,
                                      align_corners=bool(ac)).numpy()
                    cases[f"g2_{k}"] = dict(x=x, grid=g, y=y, mode=mode, pad=pad, ac=ac)
                    k += 1
    shapes3 = [(1, 1, 1, 1, 1), (1, 2, 2, 3, 4), (2, 1, 3, 5, 2), (1, 2, 4, 4, 5)]
    for (n, c, d, h, w) in shapes3:
        for mode in ["bilinear", "nearest"]:
            for pad in PADS:
                for ac in (0, 1):
                    x = rng.standard_normal((n, c, d, h, w)).astype(np.float32)
                    g = adversarial_grid(rng, n, 3, 2, 3, special=True)
                    y = F.grid_sample(torch.from_numpy(x), torch.from_numpy(g), mode=mode, padding_mode=pad,
                                      align_corners=bool(ac)).numpy()
                    cases[f"g3_{k}"] = dict(x=x, grid=g, y=y, mode=mode, pad=pad, ac=ac)
                    k += 1
    # Named cases from the facts sheet.
    x = np.array([[[[0, 10], [20, 30]]]], dtype=np.float32)
    # pixel (0.25, 0.5) with align_corners=0: g = (2p + 1) / S - 1
    g = np.array([[[[(2 * 0.25 + 1) / 2 - 1, (2 * 0.5 + 1) / 2 - 1], [-1.0, -1.0]]]], dtype=np.float32)
    y = F.grid_sample(torch.from_numpy(x), torch.from_numpy(g), mode="bilinear", padding_mode="zeros",
                      align_corners=False).numpy()
    cases["worked_example"] = dict(x=x, grid=g, y=y, mode="bilinear", pad="zeros", ac=0)
    # Rectangular map where swapping W and H changes the result.
    x = np.arange(2 * 5, dtype=np.float32).reshape(1, 1, 2, 5)
    g = np.array([[[[0.6, -0.2], [-0.2, 0.6]]]], dtype=np.float32)
    y = F.grid_sample(torch.from_numpy(x), torch.from_numpy(g), mode="bilinear", padding_mode="zeros",
                      align_corners=False).numpy()
    cases["rect_2x5"] = dict(x=x, grid=g, y=y, mode="bilinear", pad="zeros", ac=0)
    xt = np.ascontiguousarray(x.transpose(0, 1, 3, 2))
    y = F.grid_sample(torch.from_numpy(xt), torch.from_numpy(g), mode="bilinear", padding_mode="zeros",
                      align_corners=False).numpy()
    cases["rect_5x2"] = dict(x=xt, grid=g, y=y, mode="bilinear", pad="zeros", ac=0)
    return cases


def gen_msda(rng):
    cases = {}
    configs = [
        # (B, heads, hd, shapes, points, Lq); discrete needs W >= H on every level
        (1, 2, 5, [(4, 6), (2, 3)], [2, 3], 7),
        (2, 3, 8, [(5, 5), (3, 4), (1, 2)], [3, 1, 2], 4),
        (1, 8, 24, [(8, 8), (4, 4), (2, 2)], [3, 6, 3], 10),
        (1, 1, 3, [(1, 1)], [4], 3),
    ]
    k = 0
    for (b, nh, hd, shapes, points, lq) in configs:
        for method in ["default", "discrete", "discrete_fixed"]:
            tokens = sum(h * w for h, w in shapes)
            value = rng.standard_normal((b, tokens, nh, hd)).astype(np.float32)
            loc = rng.uniform(-0.15, 1.15, size=(b, lq, nh, sum(points), 2)).astype(np.float32)
            logits = rng.standard_normal((b, lq, nh, sum(points))).astype(np.float32)
            w = torch.softmax(torch.from_numpy(logits), -1).numpy()
            y = msda_decoder(torch.from_numpy(value), shapes, torch.from_numpy(loc), torch.from_numpy(w), points,
                             method).numpy()
            cases[f"msda_{k}"] = dict(value=value, loc=loc, w=w, y=y, method=method,
                                      shapes=np.array(shapes, dtype=np.int64), points=np.array(points, dtype=np.int64))
            k += 1
    return cases


def save(name, cases):
    os.makedirs(OUT, exist_ok=True)
    arrays = {}
    for cname, d in cases.items():
        for key, val in d.items():
            if isinstance(val, str):
                val = np.frombuffer(val.encode(), dtype=np.uint8)
            arrays[f"{cname}.{key}"] = np.ascontiguousarray(val)
    np.savez_compressed(os.path.join(OUT, name), **arrays)
    print(f"wrote {name}: {len(cases)} cases")


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(20261130)
    save("grid_sample_torch.npz", gen_grid_sample(rng))
    save("msda_torch.npz", gen_msda(rng))
    print("torch", torch.__version__, file=sys.stderr)


if __name__ == "__main__":
    main()
