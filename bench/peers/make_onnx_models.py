#!/usr/bin/python3
"""Writes the ONNX models the ONNX Runtime peer runs (into the folder given as argv[1]):
  grid_sample_level{0,1,2}.onnx  GridSample-16 at the DEIMv2-S decoder shapes;
  deform_attn_default.onnx       the decoder's unfused sampling core (three GridSample
                                 calls, concat, weighting, sum) exported from PyTorch at
                                 opset 16, as DEIMv2's exporter produces it;
  identity.onnx                  one Identity node on the level-0 output shape, to measure
                                 the Node binding overhead alone."""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gen_golden import msda_decoder  # noqa: E402

HEADS, HD, LQ = 8, 24, 300
SHAPES = [(80, 80), (40, 40), (20, 20)]
POINTS = [3, 6, 3]


def grid_sample_model(h, w, p):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [HEADS, HD, h, w])
    g = helper.make_tensor_value_info("grid", TensorProto.FLOAT, [HEADS, LQ, p, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [HEADS, HD, LQ, p])
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="bilinear", padding_mode="zeros", align_corners=0)
    graph = helper.make_graph([node], "grid_sample", [x, g], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])


class Core(torch.nn.Module):
    def forward(self, value, loc, weights):
        return msda_decoder(value, SHAPES, loc, weights, POINTS, "default")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for lvl, (h, w) in enumerate(SHAPES):
        onnx.save(grid_sample_model(h, w, POINTS[lvl]), os.path.join(out, f"grid_sample_level{lvl}.onnx"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [HEADS, HD, LQ, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [HEADS, HD, LQ, 3])
    ident = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y])
    onnx.save(helper.make_model(ident, opset_imports=[helper.make_opsetid("", 16)]), os.path.join(out, "identity.onnx"))
    tokens = sum(h * w for h, w in SHAPES)
    args = (torch.zeros(1, tokens, HEADS, HD), torch.zeros(1, LQ, HEADS, 12, 2), torch.zeros(1, LQ, HEADS, 12))
    torch.onnx.export(Core(), args, os.path.join(out, "deform_attn_default.onnx"), opset_version=16,
                      input_names=["value", "locations", "weights"], output_names=["out"])
    print("wrote models to", out)


if __name__ == "__main__":
    main()
