#!/usr/bin/python3
"""Gives a trained NanoDet (exported to ONNX by `rkdeploy export`) Ultralytics' output layout.

YOLOv8 and YOLO11 exports end in one output `output0` [1, 4 + classes, anchors]: box centre,
width and height in input pixels, concatenated on axis 1 with the class probabilities in 0..1.
That concatenation of two very different ranges is what one int8 scale destroys; rkdeploy has
no trained YOLO weights (nothing packaged in Debian), so this script builds the same layout on
NanoDet's trained head: per level, the distance distributions [1, g*g, 4 * bins] go through
softmax over the bins, their expectation times the stride (left, top, right, bottom), and a
matrix to centre x, y, width, height around the cell centres ((x + 0.5) s, (y + 0.5) s);
the class probabilities [1, g*g, classes] are kept; both are transposed to channels first, the
levels concatenated on the anchor axis, and boxes and classes on axis 1, as Ultralytics does.
Decoded with the `yolo` output kind (docs/detector-config.md) the result must equal NanoDet's
own `gfl` decoding.

Usage: yolo_layout.py NANODET.onnx INPUT_SIZE OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def main():
    src, size, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    m = onnx.load(src)
    g = m.graph
    shapes = {o.name: [d.dim_value for d in o.type.tensor_type.shape.dim] for o in g.output}
    levels = {}
    for name, s in shapes.items():
        levels.setdefault(s[1], []).append((name, s[2]))
    nodes, inits = [], []
    boxes, classes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    for cells in sorted(levels, reverse=True):
        # The distribution output has 4 * bins columns (the smaller when both divide by 4,
        # NanoDet's 44 beside 80 classes), as rkdeploy's gfl decoder pairs them.
        (a, ca), (b, cb) = levels[cells]
        a_is_dist = ca % 4 == 0 and (cb % 4 != 0 or ca < cb)
        cls, dist = (b, a) if a_is_dist else (a, b)
        n_classes, dist_c = shapes[cls][2], shapes[dist][2]
        bins = dist_c // 4
        grid = int(round(cells ** 0.5))
        stride = size / grid
        p = "yolo_layout/l%d/" % grid
        nodes += [
            helper.make_node("Reshape", [dist, const(p + "shape4", np.array([1, cells, 4, bins], np.int64))], [p + "dist4"]),
            helper.make_node("Softmax", [p + "dist4"], [p + "prob"], axis=-1),
            helper.make_node("MatMul", [p + "prob", const(p + "bins", np.arange(bins, dtype=np.float32).reshape(bins, 1) * stride)], [p + "ltrb4"]),
            helper.make_node("Reshape", [p + "ltrb4", const(p + "shape3", np.array([1, cells, 4], np.int64))], [p + "ltrb"]),
        ]
        # (l, t, r, b) -> (cx, cy, w, h) around the cell centre.
        to_xywh = np.array([[-0.5, 0, 1, 0], [0, -0.5, 0, 1], [0.5, 0, 1, 0], [0, 0.5, 0, 1]], np.float32)
        ys, xs = np.divmod(np.arange(cells), grid)
        centre = np.stack([(xs + 0.5) * stride, (ys + 0.5) * stride, np.zeros(cells), np.zeros(cells)], axis=1).astype(np.float32)[None]
        nodes += [
            helper.make_node("MatMul", [p + "ltrb", const(p + "to_xywh", to_xywh)], [p + "wh"]),
            helper.make_node("Add", [p + "wh", const(p + "centre", centre)], [p + "xywh"]),
            helper.make_node("Transpose", [p + "xywh"], [p + "boxes"], perm=[0, 2, 1]),
            helper.make_node("Transpose", [cls], [p + "classes"], perm=[0, 2, 1]),
        ]
        boxes.append(p + "boxes")
        classes.append(p + "classes")
    nodes += [
        helper.make_node("Concat", boxes, ["yolo_layout/boxes"], axis=2),
        helper.make_node("Concat", classes, ["yolo_layout/classes"], axis=2),
        helper.make_node("Concat", ["yolo_layout/boxes", "yolo_layout/classes"], ["output0"], axis=1),
    ]
    total = sum(levels)
    g.node.extend(nodes)
    g.initializer.extend(inits)
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("output0", onnx.TensorProto.FLOAT, [1, 4 + n_classes, total]))
    onnx.checker.check_model(m)
    onnx.save(m, out)
    print("wrote %s: output0 [1, %d, %d] (xywh in input pixels + %d class probabilities)" % (out, 4 + n_classes, total, n_classes))


if __name__ == "__main__":
    main()
