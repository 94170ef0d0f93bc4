#!/usr/bin/python3
"""Small ONNX QDQ graphs, one per int8 pattern whose ONNX Runtime arithmetic rkdeploy's
`--backend int8` reproduces bit for bit (tests/cli/test_quantize.sh): Add, Add + Relu (zero
point -128), Mul of two maps (mul) and of a map by one value per channel (mulpc: the second
operand is GlobalMaxPool(y), exact in float, quantized: a squeeze-excite product), Sub, Max
and Min of two maps, Add, Sub and Max of a map and one value per channel (addpc, subpc, maxpc), Conv and depthwise Conv with int32 bias, per-channel int8 weights; and, for every
convolution, the expected quantized output from an int64 evaluation of the QDQ semantics written
here (QuantizeLinear: round half to even of x / scale in float32, + zero point, saturated;
accumulation in int64; requantization as ONNX Runtime defines it: s = x_scale * w_scale / y_scale
in float32, y = nearbyint(clamp(float32(acc) * s)) + y_zero_point).

Three saturation probes (probe_s8, probe_u8, probe_u8u8) tell whether ONNX Runtime's int8
convolution is exact on the CPU at hand: their inputs sit at the top of the range (int8 127,
uint8 255) and their weights at +-127 (uint8 255 / 0 around zero point 128), so that a kernel
that sums pairs of u8 x s8 products in saturating int16 (x86 vpmaddubsw without VNNI: 2 * 255 *
127 = 64770 > 32767) gives wrong outputs, while a kernel without such an intermediate gives the
int64 evaluation. probe_s8 is the layout of `rkdeploy quantize`'s int8 models (int8 activations,
per-channel int8 weights), probe_u8 uint8 activations with int8 weights, probe_u8u8 the
`--dtype uint8` layout (uint8 activations, per-tensor uint8 weights with a zero point).

usage: make_qdq_ops.py OUT_DIR [SEED]
  writes OUT_DIR/{add,addrelu,mul,mulpc,sub,max,min,addpc,subpc,maxpc,dw,conv,probe_s8,probe_u8,probe_u8u8}.onnx,
  x.npy, y.npy (inputs of all but the probes), probe_*.x.npy (a probe's input), and for each convolution KIND.expected.npy
  (the int64 evaluation's quantized output, int32) and KIND.out.json (y_scale, y_zero_point)
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out=sys.argv[1]
os.makedirs(out, exist_ok=True)
rng=np.random.default_rng(int(sys.argv[2]) if len(sys.argv)>2 else 0)
def qdq(name, x, s, z):
    return [h.make_node("QuantizeLinear",[x,name+"_s",name+"_z"],[name+"_q"]), h.make_node("DequantizeLinear",[name+"_q",name+"_s",name+"_z"],[name+"_dq"])], [nh.from_array(np.array(s,np.float32),name+"_s"), nh.from_array(np.array(z,np.int8),name+"_z")]
def quantize(x, s, z, lo, hi):
    """QuantizeLinear in float32: saturate(round_half_even(x / s) + z)."""
    return np.clip(np.rint(x.astype(np.float32) / np.float32(s)) + z, lo, hi).astype(np.int64)

def conv_int64(xq, xz, wq, wz, bq, group, pad):
    """sum over the window of (x - xz) * (w - wz) + bias in int64; padding taps add nothing."""
    n, c, hh, ww = xq.shape; m, cg, kh, kw = wq.shape
    xp = np.zeros((n, c, hh + 2 * pad, ww + 2 * pad), np.int64)
    xp[:, :, pad:pad + hh, pad:pad + ww] = xq - xz
    oh, ow = hh + 2 * pad - kh + 1, ww + 2 * pad - kw + 1
    acc = np.zeros((n, m, oh, ow), np.int64)
    w = wq.astype(np.int64) - np.asarray(wz, np.int64).reshape(-1, 1, 1, 1)
    for oc in range(m):
        g = oc // (m // group)
        for ky in range(kh):
            for kx in range(kw):
                win = xp[:, g * cg:(g + 1) * cg, ky:ky + oh, kx:kx + ow]
                acc[:, oc] += np.tensordot(win, w[oc, :, ky, kx], axes=([1], [0]))
    return acc + bq.astype(np.int64).reshape(1, -1, 1, 1)

def requant_onnx(acc, xs, ws, ys, yz, lo, hi):
    """ONNX Runtime's QLinearConv requantization (float32 scale and product, half to even)."""
    s = (np.float32(xs) * np.asarray(ws, np.float32)) / np.float32(ys)
    f = acc.astype(np.float32) * s.reshape(1, -1, 1, 1).astype(np.float32)
    f = np.clip(f, np.float32(lo - yz), np.float32(hi - yz))
    return (np.rint(f).astype(np.int64) + yz).astype(np.int32)

def save_expected(kind, q, ys, yz):
    np.save(os.path.join(out, kind + ".expected.npy"), q)
    json.dump({"y_scale": float(np.float32(ys)), "y_zero_point": int(yz)}, open(os.path.join(out, kind + ".out.json"), "w"))

def model(kind):
    nodes=[];inits=[]
    n,i=qdq("qa","x",0.0371,-5); nodes+=n; inits+=i
    pc = kind.endswith("pc")
    if pc: nodes.append(h.make_node("GlobalMaxPool",["y"],["ym"]))
    n,i=qdq("qb","ym" if pc else "y",0.0213,7); nodes+=n; inits+=i
    if kind=="add":
        nodes.append(h.make_node("Add",["qa_dq","qb_dq"],["s"]))
    elif kind=="mul":
        nodes.append(h.make_node("Mul",["qa_dq","qb_dq"],["s"]))
    elif kind in ("sub","max","min","addpc","subpc","maxpc"):
        nodes.append(h.make_node(kind[:3].capitalize(),["qa_dq","qb_dq"],["s"]))
    elif kind=="mulpc":
        nodes.append(h.make_node("Mul",["qb_dq","qa_dq"],["s"]))  # the per-channel operand first: rkdeploy swaps them
    elif kind=="addrelu":
        nodes.append(h.make_node("Add",["qa_dq","qb_dq"],["s0"])); nodes.append(h.make_node("Relu",["s0"],["s"]))
    elif kind in ("dw","conv"):
        oc, g = (8,8) if kind=="dw" else (8,1)
        w=rng.standard_normal((oc,8//g,3,3)).astype(np.float32); ws=np.abs(w).reshape(oc,-1).max(1)/127
        inits+= [nh.from_array(np.clip(np.round(w/ws[:,None,None,None]),-127,127).astype(np.int8),"w_q"), nh.from_array(ws.astype(np.float32),"w_s"), nh.from_array(np.zeros(oc,np.int8),"w_z")]
        b=rng.standard_normal(oc).astype(np.float32); bs=(np.float32(0.0371)*ws).astype(np.float32)
        inits+= [nh.from_array(np.round(b/bs).astype(np.int32),"bias_q"), nh.from_array(bs,"bias_s"), nh.from_array(np.zeros(oc,np.int32),"bias_z")]
        nodes+= [h.make_node("DequantizeLinear",["w_q","w_s","w_z"],["w"],axis=0), h.make_node("DequantizeLinear",["bias_q","bias_s","bias_z"],["bb"],axis=0),
                 h.make_node("Conv",["qa_dq","w","bb"],["s"],group=g,pads=[1,1,1,1])]
        convs[kind] = (np.clip(np.round(w/ws[:,None,None,None]),-127,127).astype(np.int8), ws.astype(np.float32), np.round(b/bs).astype(np.int32), g)
    n,i=qdq("o","s",0.0457 if kind!="addrelu" else 0.02,3 if kind!="addrelu" else -128); nodes+=n; inits+=i
    g=h.make_graph(nodes,kind,[h.make_tensor_value_info("x",T.FLOAT,[1,8,16,16]),h.make_tensor_value_info("y",T.FLOAT,[1,8,16,16])],[h.make_tensor_value_info("o_dq",T.FLOAT,[1,8,16,16])],inits)
    m=h.make_model(g,opset_imports=[h.make_opsetid("",17)]); m.ir_version=8; onnx.save(m,os.path.join(out,kind+".onnx"))
convs={}
for k in ["add","addrelu","mul","mulpc","sub","max","min","addpc","subpc","maxpc","dw","conv"]: model(k)
x=(rng.standard_normal((1,8,16,16))*2).astype(np.float32)
np.save(os.path.join(out,"x.npy"),x); np.save(os.path.join(out,"y.npy"),(rng.standard_normal((1,8,16,16))*1.5).astype(np.float32))
for k,(wq,ws,bq,g) in convs.items():
    xq=quantize(x,0.0371,-5,-128,127)
    save_expected(k, requant_onnx(conv_int64(xq,-5,wq,0,bq,g,1),0.0371,ws,0.0457,3,-128,127), 0.0457, 3)

def probe(kind):
    """A 16 -> 32 channel 3x3 convolution at the top of the input range (see the docstring).
    Input scale 1 (the float input is the quantized one), output scale a power of two, weight
    scales spread over two decades."""
    act_u8 = kind != "probe_s8"; w_u8 = kind == "probe_u8u8"
    c, m = 16, 32
    top = 255 if act_u8 else 127
    xq = np.full((1, c, 12, 12), top, np.int64)
    xq = np.where(rng.random(xq.shape) < 0.25, rng.integers(0 if act_u8 else -128, top + 1, size=xq.shape), xq)
    if w_u8:
        wq = np.where(rng.random((m, c, 3, 3)) < 0.8, 255, 0).astype(np.uint8); wz = 128
        ws = np.float32(0.002); ws_vec = np.full(m, ws, np.float32)
    else:
        wq = np.where(rng.random((m, c, 3, 3)) < 0.8, 127, -127).astype(np.int8); wz = 0
        ws_vec = (0.0005 * 10 ** np.linspace(0, 2, m)).astype(np.float32); ws = ws_vec
    bq = rng.integers(-2000, 2000, size=m).astype(np.int32)
    acc = conv_int64(xq, 0, wq, wz, bq, 1, 1)
    yz = 0
    lo, hi = (0, 255) if act_u8 else (-128, 127)
    # output scale: a power of two that puts the largest |output| near 100 steps
    peak = float(np.max(np.abs(acc.astype(np.float64) * ws_vec.reshape(1, -1, 1, 1))))
    ys = np.float32(2.0 ** np.ceil(np.log2(peak / 100)))
    save_expected(kind, requant_onnx(acc, 1.0, ws_vec, ys, yz, lo, hi), ys, yz)
    np.save(os.path.join(out, kind + ".x.npy"), xq.astype(np.float32))
    at = np.uint8 if act_u8 else np.int8; wt = np.uint8 if w_u8 else np.int8
    inits = [nh.from_array(np.array(1.0, np.float32), "x_s"), nh.from_array(np.array(0, at), "x_z"),
             nh.from_array(wq.astype(wt), "w_q"), nh.from_array(np.asarray(ws, np.float32), "w_s"),
             nh.from_array(np.array(wz, wt) if w_u8 else np.zeros(m, wt), "w_z"),
             nh.from_array(bq, "bias_q"), nh.from_array(ws_vec, "bias_s"),
             nh.from_array(np.zeros(m, np.int32), "bias_z"),
             nh.from_array(np.array(ys, np.float32), "o_s"), nh.from_array(np.array(yz, at), "o_z")]
    waxis = {} if w_u8 else {"axis": 0}
    nodes = [h.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["x_q"]), h.make_node("DequantizeLinear", ["x_q", "x_s", "x_z"], ["x_dq"]),
             h.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w"], **waxis),
             h.make_node("DequantizeLinear", ["bias_q", "bias_s", "bias_z"], ["bb"], axis=0),
             h.make_node("Conv", ["x_dq", "w", "bb"], ["s"], pads=[1, 1, 1, 1]),
             h.make_node("QuantizeLinear", ["s", "o_s", "o_z"], ["o_q"]), h.make_node("DequantizeLinear", ["o_q", "o_s", "o_z"], ["o_dq"])]
    gr = h.make_graph(nodes, kind, [h.make_tensor_value_info("x", T.FLOAT, [1, c, 12, 12])],
                      [h.make_tensor_value_info("o_dq", T.FLOAT, [1, m, 12, 12])], inits)
    mo = h.make_model(gr, opset_imports=[h.make_opsetid("", 17)]); mo.ir_version = 8
    onnx.save(mo, os.path.join(out, kind + ".onnx"))
for k in ["probe_s8", "probe_u8", "probe_u8u8"]: probe(k)
