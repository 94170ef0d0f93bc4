#!/usr/bin/python3
"""Expands the custom nodes of a model written by `rkdeploy export --rknn-custom-op` into
standard ONNX operators, independently of rkdeploy (onnx.helper only), so that ONNX Runtime can
run it:   rknn_expand.py IN.onnx OUT.onnx
cstMSDeformAttn(value [B,T,nH,c], locations [B,Q,nH,P,2], weights [B,Q,nH,P]) becomes, per level,
Slice the level's tokens -> Transpose(0,2,3,1) -> Reshape [B*nH,c,h,w] and GridSample(bilinear,
zeros, align_corners 0) at 2*loc-1 (the default method; the discrete ones are refused), then
Concat over the points, times the weights, ReduceSum -> [B, Q, nH*c]: the decoder's own
formulation (deformable_attention_core_func_v2). cstGridSample becomes GridSample.
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


def attrs(n):
    return {a.name: (list(a.ints) if a.ints else a.i) for a in n.attribute}


def main(src, dst):
    m = onnx.load(src)
    g = m.graph
    shapes = {}
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    out_nodes, inits, count = [], [], [0]

    def const(name, arr):
        if name not in {i.name for i in inits}:
            inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, **kw):
        count[0] += 1
        o = f"rknn_expand/{op}_{count[0]}"
        out_nodes.append(helper.make_node(op, ins, [o], name=o, **kw))
        return o

    for n in g.node:
        if n.op_type == "cstGridSample":
            a = attrs(n)
            out_nodes.append(helper.make_node("GridSample", list(n.input), list(n.output), name=n.name, mode=MODES[a["mode"]],
                                              padding_mode=PADDINGS[a["padding_mode"]], align_corners=a["align_corners"]))
            continue
        if n.op_type != "cstMSDeformAttn":
            out_nodes.append(n)
            continue
        a = attrs(n)
        if a["method"] != 0:
            sys.exit(f"{n.name}: method {a['method']} (discrete) has no GridSample form; expand only the default method")
        value, loc, w = n.input
        b, t, heads, c = shapes[value]
        q = shapes[loc][1]
        samples, start, p0 = [], 0, 0
        for h, wd, p in zip(a["level_h"], a["level_w"], a["points"]):
            v = node("Slice", [value, const(f"{n.name}/s{start}", [start]), const(f"{n.name}/e{start}", [start + h * wd]), const(f"{n.name}/ax1", [1])])
            v = node("Transpose", [v], perm=[0, 2, 3, 1])
            v = node("Reshape", [v, const(f"{n.name}/vshape{start}", [b * heads, c, h, wd])])
            l = node("Slice", [loc, const(f"{n.name}/ps{p0}", [p0]), const(f"{n.name}/pe{p0}", [p0 + p]), const(f"{n.name}/ax3", [3])])
            l = node("Sub", [node("Mul", [l, const(f"{n.name}/two", np.float32(2))]), const(f"{n.name}/one", np.float32(1))])
            l = node("Transpose", [l], perm=[0, 2, 1, 3, 4])
            l = node("Reshape", [l, const(f"{n.name}/lshape{p0}", [b * heads, q, p, 2])])
            samples.append(node("GridSample", [v, l], mode="bilinear", padding_mode="zeros", align_corners=0))
            start += h * wd
            p0 += p
        s = node("Concat", samples, axis=-1)
        wt = node("Reshape", [node("Transpose", [w], perm=[0, 2, 1, 3]), const(f"{n.name}/wshape", [b * heads, 1, q, p0])])
        r = node("ReduceSum", [node("Mul", [s, wt]), const(f"{n.name}/axm1", [-1])], keepdims=0)
        r = node("Reshape", [r, const(f"{n.name}/oshape", [b, heads * c, q])])
        out_nodes.append(helper.make_node("Transpose", [r], list(n.output), name=n.name, perm=[0, 2, 1]))
    del g.node[:]
    g.node.extend(out_nodes)
    g.initializer.extend(inits)
    onnx.checker.check_model(m)
    onnx.save(m, dst)


if __name__ == "__main__":
    main(*sys.argv[1:3])
