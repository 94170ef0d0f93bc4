#!/usr/bin/python3
"""Builds a small QOperator-form int8 ONNX model by hand (Debian's python3-onnx): float input
-> QuantizeLinear (uint8) -> QLinearConv 3x3 (int8 per-channel weights, int32 bias) ->
QLinearConv 3x3 stride 2, 2 groups -> DequantizeLinear -> float output, plus a fixed input.
Used to check that rkdeploy's int8 semantics (onnx_float requantization) give ONNX Runtime's
outputs bit for bit: node scripts/models/check_qlinear_with_ort.js OUT_DIR.

  /usr/bin/python3 scripts/models/make_qlinear_model.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(3)
    c0, c1, c2 = 3, 8, 8
    w1 = rng.integers(-127, 128, size=(c1, c0, 3, 3), dtype=np.int8)
    w2 = rng.integers(-127, 128, size=(c2, c1 // 2, 3, 3), dtype=np.int8)
    # Per-channel weight scales spread over 2 decades, as in trained detectors.
    s1 = (10.0 ** rng.uniform(-3.5, -1.5, size=c1)).astype(np.float32)
    s2 = (10.0 ** rng.uniform(-3.5, -1.5, size=c2)).astype(np.float32)
    inits = [
        numpy_helper.from_array(np.array(0.0078125, np.float32), "x_scale"),
        numpy_helper.from_array(np.array(128, np.uint8), "x_zp"),
        numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(s1, "w1_scale"),
        numpy_helper.from_array(np.zeros(c1, np.int8), "w1_zp"),
        numpy_helper.from_array(rng.integers(-3000, 3000, size=c1, dtype=np.int32), "b1"),
        numpy_helper.from_array(np.array(0.05, np.float32), "y1_scale"),
        numpy_helper.from_array(np.array(120, np.uint8), "y1_zp"),
        numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(s2, "w2_scale"),
        numpy_helper.from_array(np.zeros(c2, np.int8), "w2_zp"),
        numpy_helper.from_array(rng.integers(-3000, 3000, size=c2, dtype=np.int32), "b2"),
        numpy_helper.from_array(np.array(0.07, np.float32), "y2_scale"),
        numpy_helper.from_array(np.array(125, np.uint8), "y2_zp"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="quantize"),
        helper.make_node("QLinearConv", ["xq", "x_scale", "x_zp", "w1", "w1_scale", "w1_zp", "y1_scale", "y1_zp", "b1"],
                         ["y1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("QLinearConv", ["y1", "y1_scale", "y1_zp", "w2", "w2_scale", "w2_zp", "y2_scale", "y2_zp", "b2"],
                         ["y2"], name="conv2", pads=[1, 1, 1, 1], strides=[2, 2], group=2),
        helper.make_node("DequantizeLinear", ["y2", "y2_scale", "y2_zp"], ["y"], name="dequantize"),
    ]
    graph = helper.make_graph(nodes, "qlinear_tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c0, 32, 40])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", c2, 16, 20])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="rkdeploy")
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "qlinear_tiny.onnx"))
    x = rng.uniform(-1, 1, size=(1, c0, 32, 40)).astype(np.float32)
    np.save(os.path.join(out, "qlinear_tiny.input_x.npy"), x)
    print(f"wrote {out}/qlinear_tiny.onnx")

    # The same network in QDQ form (float Conv between DequantizeLinear and QuantizeLinear, the
    # bias an int32 tensor at scale x_s * w_s[c]), which runtimes fuse back into QLinearConv.
    b_inits = [
        numpy_helper.from_array((np.float32(0.0078125) * s1).astype(np.float32), "b1_scale"),
        numpy_helper.from_array(np.zeros(c1, np.int32), "b1_zp"),
        numpy_helper.from_array((np.float32(0.05) * s2).astype(np.float32), "b2_scale"),
        numpy_helper.from_array(np.zeros(c2, np.int32), "b2_zp"),
    ]
    q = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="q0"),
        helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xd"], name="dq0"),
        helper.make_node("DequantizeLinear", ["w1", "w1_scale", "w1_zp"], ["w1d"], name="dqw1", axis=0),
        helper.make_node("DequantizeLinear", ["b1", "b1_scale", "b1_zp"], ["b1d"], name="dqb1", axis=0),
        helper.make_node("Conv", ["xd", "w1d", "b1d"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["c1", "y1_scale", "y1_zp"], ["y1"], name="q1"),
        helper.make_node("DequantizeLinear", ["y1", "y1_scale", "y1_zp"], ["y1d"], name="dq1"),
        helper.make_node("DequantizeLinear", ["w2", "w2_scale", "w2_zp"], ["w2d"], name="dqw2", axis=0),
        helper.make_node("DequantizeLinear", ["b2", "b2_scale", "b2_zp"], ["b2d"], name="dqb2", axis=0),
        helper.make_node("Conv", ["y1d", "w2d", "b2d"], ["c2"], name="conv2", pads=[1, 1, 1, 1], strides=[2, 2], group=2),
        helper.make_node("QuantizeLinear", ["c2", "y2_scale", "y2_zp"], ["y2"], name="q2"),
        helper.make_node("DequantizeLinear", ["y2", "y2_scale", "y2_zp"], ["y"], name="dq2"),
    ]
    qdq = helper.make_graph(q, "qdq_tiny", graph.input, graph.output, inits + b_inits)
    qmodel = helper.make_model(qdq, opset_imports=[helper.make_opsetid("", 13)], producer_name="rkdeploy")
    qmodel.ir_version = 7
    onnx.checker.check_model(qmodel)
    onnx.save(qmodel, os.path.join(out, "qdq_tiny.onnx"))
    np.save(os.path.join(out, "qdq_tiny.input_x.npy"), x)
    print(f"wrote {out}/qdq_tiny.onnx")


if __name__ == "__main__":
    main()
