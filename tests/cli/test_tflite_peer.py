#!/usr/bin/python3
"""rkdeploy's int8 path against TensorFlow Lite itself, one quantized operator at a time.

Usage: test_tflite_peer.py RKDEPLOY FLATC SCHEMA.fbs PEER_DIR WORK_DIR

Writes single-operator int8/uint8 TFLite models (JSON through flatc and rkdeploy's schema
subset), runs each on TensorFlow Lite (scripts/models/tflite_peer: the WebAssembly build of
the TFLite interpreter, with its default XNNPACK delegate) and on `rkdeploy run --backend int8
--requant tflite_xnnpack` with the same random input, and compares the integer outputs. The
cases include ties (power-of-two scales) that tell the rounding conventions apart;
RKD_PEER_REQUANT=<convention> runs rkdeploy with another one, to see which cases it changes. Every case must match bit for bit, except those listed in
KNOWN with the reason; a KNOWN case that starts matching fails too (the list must be kept
true). Prints one line per case.
"""
import json
import os
import subprocess
import sys

import numpy as np

RKDEPLOY, FLATC, SCHEMA, PEER, WORK = sys.argv[1:6]
HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "..", "..", "scripts", "models", "tflite_peer", "tflite_run.js")

CODES = {"ADD": 0, "AVERAGE_POOL_2D": 1, "CONCATENATION": 2, "CONV_2D": 3, "DEPTHWISE_CONV_2D": 4,
         "FULLY_CONNECTED": 9, "LOGISTIC": 14, "MAX_POOL_2D": 17, "MUL": 18, "RESIZE_BILINEAR": 23,
         "SOFTMAX": 25, "TANH": 28, "MEAN": 40, "SUB": 41, "LEAKY_RELU": 98, "HARD_SWISH": 117}
TYPES = {"int8": 9, "uint8": 3, "int32": 2, "float32": 0}
ACT = {"NONE": 0, "RELU": 1, "RELU6": 3}

# Cases whose outputs may differ from TensorFlow Lite's, with the reason (kept true: a listed
# case that matches exactly fails the test).
KNOWN = {
    "concat_uint8_requantized": "this TFLite build copies uint8 CONCATENATION inputs whose scale and zero point differ "
                                "from the output's without requantizing them (a wrong result); rkdeploy requantizes "
                                "as TFLite's kernel (ConcatenationWithScaling) defines",
}


class Model:
    """One subgraph built as the JSON form of the TFLite schema."""

    def __init__(self):
        self.tensors, self.buffers, self.codes, self.ops = [], [{}], [], []
        self.inputs, self.outputs = [], []

    def tensor(self, name, shape, dtype, scale=None, zp=None, data=None, axis=0):
        t = {"name": name, "shape": list(shape), "type": TYPES[dtype], "buffer": 0}
        if scale is not None:
            scales = list(np.atleast_1d(scale).astype(np.float32).tolist())
            zps = [int(z) for z in np.atleast_1d(zp if zp is not None else 0)]
            if len(zps) == 1 and len(scales) > 1:
                zps = zps * len(scales)
            t["quantization"] = {"scale": scales, "zero_point": zps, "quantized_dimension": axis}
        if data is not None:
            t["buffer"] = len(self.buffers)
            self.buffers.append({"data": list(np.ascontiguousarray(data).tobytes())})
        self.tensors.append(t)
        return len(self.tensors) - 1

    def op(self, name, ins, outs, options_type=None, options=None):
        if name not in [c["name"] for c in self.codes]:
            self.codes.append({"name": name})
        code = [c["name"] for c in self.codes].index(name)
        o = {"opcode_index": code, "inputs": ins, "outputs": outs}
        if options_type:
            o["builtin_options_type"] = options_type
            o["builtin_options"] = options or {}
        self.ops.append(o)

    def write(self, path):
        codes = [{"deprecated_builtin_code": min(CODES[c["name"]], 127), "builtin_code": CODES[c["name"]], "version": 1}
                 for c in self.codes]
        doc = {"version": 3, "operator_codes": codes, "buffers": self.buffers,
               "subgraphs": [{"tensors": self.tensors, "inputs": self.inputs, "outputs": self.outputs, "operators": self.ops}]}
        js = path[:-len(".tflite")] + ".json"
        with open(js, "w") as f:
            json.dump(doc, f)
        subprocess.run([FLATC, "-b", "-o", os.path.dirname(path), SCHEMA, js], check=True)
        os.replace(path[:-len(".tflite")] + ".bin", path)


def unary(op, shape, dtype, xq, yq, options_type=None, options=None):
    m = Model()
    x = m.tensor("x", shape, dtype, *xq)
    y = m.tensor("y", shape, dtype, *yq)
    m.op(op, [x], [y], options_type, options)
    m.inputs, m.outputs = [x], [y]
    return m


def binary(op, shape_a, shape_b, dtype, aq, bq, yq, act, options_type):
    m = Model()
    a = m.tensor("a", shape_a, dtype, *aq)
    b = m.tensor("b", shape_b, dtype, *bq)
    y = m.tensor("y", shape_a, dtype, *yq)
    m.op(op, [a, b], [y], options_type, {"fused_activation_function": act})
    m.inputs, m.outputs = [a, b], [y]
    return m


def cases(rng):
    i8, u8 = "int8", "uint8"
    yield "logistic_int8", unary("LOGISTIC", [1, 6, 5, 8], i8, (0.061, 7), (1 / 256, -128))
    yield "logistic_uint8", unary("LOGISTIC", [3, 40], u8, (0.043, 121), (1 / 256, 0))
    yield "tanh_int8", unary("TANH", [1, 4, 4, 16], i8, (0.027, -5), (1 / 128, 0))
    yield "hard_swish_int8", unary("HARD_SWISH", [1, 5, 5, 12], i8, (0.087, -9), (0.052, -101), "HardSwishOptions")
    yield "hard_swish_small_range", unary("HARD_SWISH", [2, 128], i8, (0.0123, 20), (0.0071, -110), "HardSwishOptions")
    yield "leaky_relu_int8", unary("LEAKY_RELU", [1, 6, 6, 8], i8, (0.045, 3), (0.031, -30), "LeakyReluOptions", {"alpha": 0.1})
    yield "leaky_relu_uint8", unary("LEAKY_RELU", [2, 64], u8, (0.045, 131), (0.021, 90), "LeakyReluOptions", {"alpha": 0.2})
    yield "softmax_int8", unary("SOFTMAX", [4, 37], i8, (0.093, 11), (1 / 256, -128), "SoftmaxOptions", {"beta": 1.0})
    yield "softmax_uint8", unary("SOFTMAX", [2, 91], u8, (0.071, 140), (1 / 256, 0), "SoftmaxOptions", {"beta": 1.0})
    # MEAN over height and width (global average pooling as the converter writes it).
    for name, dtype, xq, yq in (("mean_hw_int8", i8, (0.05, -3), (0.021, 4)), ("mean_hw_uint8", u8, (0.05, 125), (0.05, 125))):
        m = Model()
        x = m.tensor("x", [1, 7, 9, 6], dtype, *xq)
        ax = m.tensor("axes", [2], "int32", data=np.array([1, 2], np.int32))
        y = m.tensor("y", [1, 1, 1, 6], dtype, *yq)
        m.op("MEAN", [x, ax], [y], "ReducerOptions", {"keep_dims": True})
        m.inputs, m.outputs = [x], [y]
        yield name, m
    for name, hw, out, align, half in (("resize_bilinear_2x_half_pixel", (5, 6), (10, 12), False, True),
                                      ("resize_bilinear_align_corners", (4, 4), (7, 9), True, False),
                                      ("resize_bilinear_asymmetric", (3, 5), (8, 11), False, False)):
        m = Model()
        x = m.tensor("x", [1, hw[0], hw[1], 4], i8, 0.04, -7)
        sz = m.tensor("size", [2], "int32", data=np.array(out, np.int32))
        y = m.tensor("y", [1, out[0], out[1], 4], i8, 0.04, -7)
        m.op("RESIZE_BILINEAR", [x, sz], [y], "ResizeBilinearOptions", {"align_corners": align, "half_pixel_centers": half})
        m.inputs, m.outputs = [x], [y]
        yield name, m
    yield "add_relu6", binary("ADD", [1, 5, 5, 8], [1, 5, 5, 8], i8, (0.05, 4), (0.031, -9), (0.027, -128), ACT["RELU6"], "AddOptions")
    yield "add_uint8", binary("ADD", [2, 50], [2, 50], u8, (0.05, 128), (0.2, 100), (0.11, 120), ACT["NONE"], "AddOptions")
    yield "sub_int8", binary("SUB", [1, 4, 4, 8], [1, 4, 4, 8], i8, (0.05, 4), (0.031, -9), (0.047, 3), ACT["NONE"], "SubOptions")
    yield "mul_relu", binary("MUL", [1, 4, 4, 8], [1, 4, 4, 8], i8, (0.05, 4), (0.031, -9), (0.037, -128), ACT["RELU"], "MulOptions")
    for name, op, k, s, pad in (("avg_pool_3x3_s2_same", "AVERAGE_POOL_2D", 3, 2, 0), ("max_pool_2x2_s2_valid", "MAX_POOL_2D", 2, 2, 1)):
        m = Model()
        x = m.tensor("x", [1, 9, 9, 8], i8, 0.05, -2)
        o = 5 if pad == 0 else 4
        y = m.tensor("y", [1, o, o, 8], i8, 0.05, -2)
        m.op(op, [x], [y], "Pool2DOptions", {"padding": pad, "stride_w": s, "stride_h": s, "filter_width": k, "filter_height": k})
        m.inputs, m.outputs = [x], [y]
        yield name, m
    # TFLite's int8 CONCATENATION requires the inputs' parameters to equal the output's;
    # uint8 requantizes.
    for name, dtype, aq, bq, yq in (("concat_int8", i8, (0.05, 4), (0.05, 4), (0.05, 4)),
                                    ("concat_uint8_requantized", u8, (0.05, 132), (0.09, 108), (0.07, 122))):
        m = Model()
        a = m.tensor("a", [1, 4, 4, 3], dtype, *aq)
        b = m.tensor("b", [1, 4, 4, 5], dtype, *bq)
        y = m.tensor("y", [1, 4, 4, 8], dtype, *yq)
        m.op("CONCATENATION", [a, b], [y], "ConcatenationOptions", {"axis": 3})
        m.inputs, m.outputs = [a, b], [y]
        yield name, m
    # Ties: power-of-two scales make real multipliers of 1/2 and 1/4, so that every odd
    # accumulator lies exactly between two outputs and each rounding convention shows.
    yield "mul_ties", binary("MUL", [2, 64], [2, 64], i8, (0.5, 0), (0.5, 1), (0.5, 0), ACT["NONE"], "MulOptions")
    yield "add_ties", binary("ADD", [2, 64], [2, 64], i8, (0.5, 0), (0.5, 1), (1.0, 0), ACT["NONE"], "AddOptions")
    yield "leaky_relu_ties", unary("LEAKY_RELU", [2, 128], i8, (0.5, 0), (1.0, 0), "LeakyReluOptions", {"alpha": 0.5})
    m = Model()
    x = m.tensor("x", [2, 2, 2, 64], i8, 0.5, 0)
    ax = m.tensor("axes", [2], "int32", data=np.array([1, 2], np.int32))
    y = m.tensor("y", [2, 1, 1, 64], i8, 0.5, 0)
    m.op("MEAN", [x, ax], [y], "ReducerOptions", {"keep_dims": True})
    m.inputs, m.outputs = [x], [y]
    yield "mean_ties", m
    m = Model()
    x = m.tensor("x", [2, 2, 2, 64], i8, 0.5, 0)
    ax = m.tensor("axes", [2], "int32", data=np.array([1, 2], np.int32))
    y = m.tensor("y", [2, 64], i8, 0.5, 0)
    m.op("MEAN", [x, ax], [y], "ReducerOptions", {"keep_dims": False})
    m.inputs, m.outputs = [x], [y]
    yield "mean_ties_no_keep_dims", m
    m = Model()
    x = m.tensor("x", [4, 2, 64], i8, 0.5, 0)
    ax = m.tensor("axes", [1], "int32", data=np.array([1], np.int32))
    y = m.tensor("y", [4, 1, 64], i8, 0.25, 0)
    m.op("MEAN", [x, ax], [y], "ReducerOptions", {"keep_dims": True})
    m.inputs, m.outputs = [x], [y]
    yield "mean_ties_3d", m
    m = Model()
    x = m.tensor("x", [1, 8, 8, 8], i8, 0.5, 0)
    y = m.tensor("y", [1, 4, 4, 8], i8, 0.5, 0)
    m.op("AVERAGE_POOL_2D", [x], [y], "Pool2DOptions", {"padding": 1, "stride_w": 2, "stride_h": 2, "filter_width": 2, "filter_height": 2})
    m.inputs, m.outputs = [x], [y]
    yield "avg_pool_2x2_ties", m
    m = Model()
    x = m.tensor("x", [1, 6, 6, 4], i8, 0.5, 0)
    w = rng.integers(-3, 4, size=(6, 1, 1, 4)).astype(np.int8)
    wt = m.tensor("w", [6, 1, 1, 4], i8, np.full(6, 0.25, np.float32), 0, data=w, axis=0)
    bt = m.tensor("b", [6], "int32", np.full(6, 0.125, np.float32), 0, data=rng.integers(-9, 10, size=6).astype(np.int32))
    y = m.tensor("y", [1, 6, 6, 6], i8, 0.25, 0)
    m.op("CONV_2D", [x, wt, bt], [y], "Conv2DOptions", {"padding": 1, "stride_w": 1, "stride_h": 1})
    m.inputs, m.outputs = [x], [y]
    yield "conv_ties", m
    m = Model()
    x = m.tensor("x", [1, 7, 7, 8], i8, 0.5, 0)
    w = rng.integers(-3, 4, size=(1, 3, 3, 8)).astype(np.int8)
    wt = m.tensor("w", [1, 3, 3, 8], i8, np.full(8, 0.25, np.float32), 0, data=w, axis=3)
    bt = m.tensor("b", [8], "int32", np.full(8, 0.125, np.float32), 0, data=rng.integers(-9, 10, size=8).astype(np.int32))
    y = m.tensor("y", [1, 4, 4, 8], i8, 0.25, 0)
    m.op("DEPTHWISE_CONV_2D", [x, wt, bt], [y], "DepthwiseConv2DOptions",
         {"padding": 0, "stride_w": 2, "stride_h": 2, "depth_multiplier": 1})
    m.inputs, m.outputs = [x], [y]
    yield "depthwise_ties_s2_same", m
    for name, with_bias, act, shape in (("fc_per_channel_relu", True, ACT["RELU"], [3, 40]),
                                        ("fc_no_bias", False, ACT["NONE"], [2, 40]),
                                        ("fc_from_4d", True, ACT["NONE"], [1, 2, 4, 5])):
        m = Model()
        x = m.tensor("x", shape, i8, 0.041, -3)
        w = rng.integers(-127, 128, size=(10, 40)).astype(np.int8)
        ws = np.geomspace(0.001, 0.02, 10).astype(np.float32)
        wt = m.tensor("w", [10, 40], i8, ws, 0, data=w, axis=0)
        ins = [x, wt]
        if with_bias:
            ins.append(m.tensor("b", [10], "int32", (ws * np.float32(0.041)).astype(np.float32), 0,
                                data=rng.integers(-2000, 2000, size=10).astype(np.int32)))
        y = m.tensor("y", [int(np.prod(shape)) // 40, 10], i8, 0.05, -128 if act == ACT["RELU"] else 5)
        m.op("FULLY_CONNECTED", ins, [y], "FullyConnectedOptions", {"fused_activation_function": act})
        m.inputs, m.outputs = [x], [y]
        yield name, m
    # Conv with per-channel weights whose scales spread 100x, and a fused ReLU.
    m = Model()
    x = m.tensor("x", [1, 8, 8, 6], i8, 0.043, -11)
    w = rng.integers(-127, 128, size=(10, 3, 3, 6)).astype(np.int8)
    ws = (np.geomspace(0.0003, 0.03, 10)).astype(np.float32)
    wt = m.tensor("w", [10, 3, 3, 6], i8, ws, 0, data=w, axis=0)
    bias = rng.integers(-3000, 3000, size=10).astype(np.int32)
    bt = m.tensor("b", [10], "int32", (ws * np.float32(0.043)).astype(np.float32), 0, data=bias)
    y = m.tensor("y", [1, 8, 8, 10], i8, 0.02, -128)
    m.op("CONV_2D", [x, wt, bt], [y], "Conv2DOptions", {"padding": 0, "stride_w": 1, "stride_h": 1, "fused_activation_function": ACT["RELU"]})
    m.inputs, m.outputs = [x], [y]
    yield "conv_per_channel_relu", m
    yield "mini_network", mini_network(rng)


def mini_network(rng):
    """A MobileNetV3-like block chain: CONV_2D+RELU6, DEPTHWISE_CONV_2D, ADD (residual),
    HARD_SWISH, RESIZE_BILINEAR, AVERAGE_POOL_2D, MEAN, FULLY_CONNECTED, SOFTMAX."""
    i8 = "int8"
    m = Model()

    def conv(name, x, cin, cout, k, s, xs, ys, yz, act, depthwise=False):
        if depthwise:
            w = rng.integers(-127, 128, size=(1, k, k, cin)).astype(np.int8)
            ws = np.geomspace(0.002, 0.02, cin).astype(np.float32)
            wt = m.tensor(name + "_w", [1, k, k, cin], i8, ws, 0, data=w, axis=3)
            n = cin
        else:
            w = rng.integers(-127, 128, size=(cout, k, k, cin)).astype(np.int8)
            ws = np.geomspace(0.001, 0.01, cout).astype(np.float32)
            wt = m.tensor(name + "_w", [cout, k, k, cin], i8, ws, 0, data=w, axis=0)
            n = cout
        bt = m.tensor(name + "_b", [n], "int32", (ws * np.float32(xs)).astype(np.float32), 0,
                      data=rng.integers(-500, 500, size=n).astype(np.int32))
        shape = list(m.tensors[x]["shape"])
        oh = (shape[1] + s - 1) // s
        y = m.tensor(name, [1, oh, oh, n], i8, ys, yz)
        if depthwise:
            m.op("DEPTHWISE_CONV_2D", [x, wt, bt], [y], "DepthwiseConv2DOptions",
                 {"padding": 0, "stride_w": s, "stride_h": s, "depth_multiplier": 1, "fused_activation_function": act})
        else:
            m.op("CONV_2D", [x, wt, bt], [y], "Conv2DOptions", {"padding": 0, "stride_w": s, "stride_h": s, "fused_activation_function": act})
        return y

    x = m.tensor("image", [1, 16, 16, 3], i8, 0.02, -1)
    c1 = conv("c1", x, 3, 16, 3, 2, 0.02, 0.03, -128, ACT["RELU6"])
    d1 = conv("d1", c1, 16, 16, 3, 1, 0.03, 0.04, -10, ACT["NONE"], depthwise=True)
    r1 = m.tensor("r1", [1, 8, 8, 16], i8, 0.05, -5)
    m.op("ADD", [c1, d1], [r1], "AddOptions", {"fused_activation_function": ACT["NONE"]})
    h1 = m.tensor("h1", [1, 8, 8, 16], i8, 0.04, -100)
    m.op("HARD_SWISH", [r1], [h1], "HardSwishOptions")
    sz = m.tensor("size", [2], "int32", data=np.array([12, 12], np.int32))
    u1 = m.tensor("u1", [1, 12, 12, 16], i8, 0.04, -100)
    m.op("RESIZE_BILINEAR", [h1, sz], [u1], "ResizeBilinearOptions", {"align_corners": False, "half_pixel_centers": True})
    p1 = m.tensor("p1", [1, 6, 6, 16], i8, 0.04, -100)
    m.op("AVERAGE_POOL_2D", [u1], [p1], "Pool2DOptions", {"padding": 0, "stride_w": 2, "stride_h": 2, "filter_width": 3, "filter_height": 3})
    ax = m.tensor("axes", [2], "int32", data=np.array([1, 2], np.int32))
    g1 = m.tensor("g1", [1, 16], i8, 0.03, -60)
    m.op("MEAN", [p1, ax], [g1], "ReducerOptions", {"keep_dims": False})
    w = rng.integers(-127, 128, size=(10, 16)).astype(np.int8)
    ws = np.geomspace(0.002, 0.02, 10).astype(np.float32)
    wt = m.tensor("fc_w", [10, 16], i8, ws, 0, data=w, axis=0)
    bt = m.tensor("fc_b", [10], "int32", (ws * np.float32(0.03)).astype(np.float32), 0, data=rng.integers(-300, 300, size=10).astype(np.int32))
    f1 = m.tensor("logits", [1, 10], i8, 0.08, 10)
    m.op("FULLY_CONNECTED", [g1, wt, bt], [f1], "FullyConnectedOptions", {"fused_activation_function": ACT["NONE"]})
    pr = m.tensor("probs", [1, 10], i8, 1 / 256, -128)
    m.op("SOFTMAX", [f1], [pr], "SoftmaxOptions", {"beta": 1.0})
    m.inputs, m.outputs = [x], [pr, h1]
    return m


def random_input(shape, dtype, rng):
    if dtype == "int8":
        return rng.integers(-128, 128, size=shape).astype(np.int8)
    if dtype == "uint8":
        return rng.integers(0, 256, size=shape).astype(np.uint8)
    raise SystemExit(f"unexpected input type {dtype}")


def main():
    os.makedirs(WORK, exist_ok=True)
    rng = np.random.default_rng(2026)
    failures, exact = [], 0
    for name, model in cases(rng):
        path = os.path.join(WORK, name + ".tflite")
        model.write(path)
        shapes = []
        for i in model.inputs:
            t = model.tensors[i]
            shapes.append((t["name"], t["shape"], "int8" if t["type"] == 9 else "uint8"))
        bins, args = [], []
        for tname, shape, dtype in shapes:
            arr = random_input(shape, dtype, rng)
            b = os.path.join(WORK, f"{name}.{tname}.bin")
            arr.tofile(b)
            bins.append(b)
            npy = os.path.join(WORK, f"{name}.{tname}.npy")
            np.save(npy, arr)
            args += ["--input", f"{tname}={npy}"]
        ref_dir = os.path.join(WORK, name + ".tflite_out")
        r = subprocess.run(["node", RUNNER, PEER, path, ref_dir] + bins, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{name}: TFLite failed: {r.stderr.strip()}")
            continue
        info = json.loads(r.stdout.strip().splitlines()[-1])
        ours_dir = os.path.join(WORK, name + ".rkdeploy_out")
        extra = ["--requant", os.environ.get("RKD_PEER_REQUANT", "tflite_xnnpack")]
        q = subprocess.run([RKDEPLOY, "run", path, "--backend", "int8", "--output-dir", ours_dir] + args + extra, capture_output=True, text=True)
        if q.returncode != 0:
            failures.append(f"{name}: rkdeploy failed: {q.stderr.strip()}")
            continue
        for k, o in enumerate(info["outputs"]):
            ref = np.fromfile(os.path.join(ref_dir, f"{k}.bin"), dtype=o["type"]).reshape(o["shape"])
            ours = np.load(os.path.join(ours_dir, o["name"] + ".npy"))
            if ours.shape != ref.shape or ours.dtype != ref.dtype:
                failures.append(f"{name}: output {o['name']} is {ours.dtype}{list(ours.shape)}, TFLite's {ref.dtype}{list(ref.shape)}")
                continue
            diff = np.abs(ours.astype(np.int32) - ref.astype(np.int32))
            same = int((diff == 0).sum())
            line = f"{name:32s} {same:6d}/{ref.size:<6d} equal  max |diff| {int(diff.max())} LSB"
            if name in KNOWN:
                print(line + f"  (known: {KNOWN[name]})")
                if same == ref.size:
                    failures.append(f"{name}: listed in KNOWN but now bit-exact; remove it from the list")
            else:
                print(line)
                if same != ref.size:
                    failures.append(f"{name}: {ref.size - same} of {ref.size} outputs differ from TFLite (max {int(diff.max())} LSB)")
                else:
                    exact += 1
    print(f"{exact} cases bit-exact against TensorFlow Lite")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
