"""The classes `rkdeploy export --rknn-custom-op` writes for the vendor toolkit's reg_custom_op
(rkdeploy_rknn_ops.py): each custom node, alone in an ONNX file, computed by the class's NumPy
compute() and by rkdeploy (whose importer expands the node back into its own operations);
they agree within tests/common/tolerance.h's model_agree (NumPy orders the float32 operations
differently). Also the classes' shape_infer and the refusals."""
import importlib.util
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rkdeploy


@pytest.fixture(scope="module")
def ops(models, tmp_path_factory, cli):
    d = tmp_path_factory.mktemp("rknn_ops")
    cli("export", os.path.join(models, "deimv2_s_arch_tiny.onnx"), "--rknn-custom-op", "-o", d / "m.onnx")
    spec = importlib.util.spec_from_file_location("rkdeploy_rknn_ops", d / "rkdeploy_rknn_ops.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def one_node_model(path, op_type, inputs, out_shape, **attrs):
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in inputs.items()]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))
    node = helper.make_node(op_type, list(inputs), ["y"], name="site", **attrs)
    m = helper.make_model(helper.make_graph([node], "g", ins, [out]), opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)
    return node


def agree(a, e):
    assert a.shape == e.shape
    assert np.abs(a - e).max() <= np.abs(e).max() / 16384  # tests/common/tolerance.h: model_agree


@pytest.mark.parametrize("method", [0, 1, 2])
def test_msdeform_attn_class(ops, tmp_path, method):
    rng = np.random.default_rng(method)
    # (H, W) no taller than wide: the historical discrete clamp (x to H - 1) stays inside.
    levels, points, heads, c, q = [(6, 8), (3, 4), (2, 2)], [2, 3, 1], 2, 5, 7
    t = sum(h * w for h, w in levels)
    p = sum(points)
    x = {"value": rng.standard_normal((1, t, heads, c)).astype(np.float32),
         "locations": rng.uniform(-0.1, 1.1, (1, q, heads, p, 2)).astype(np.float32),
         "weights": rng.uniform(0, 1, (1, q, heads, p)).astype(np.float32)}
    node = one_node_model(tmp_path / "m.onnx", ops.MSDA_TYPE, x, (1, q, heads * c), level_h=[h for h, _ in levels],
                          level_w=[w for _, w in levels], points=points, method=method)
    cls = ops.MSDeformAttn()
    assert cls.op_type == "cstMSDeformAttn"
    assert cls.shape_infer(node, [list(a.shape) for a in x.values()], ["float32"] * 3)[0] == [[1, q, heads * c]]
    want = rkdeploy.load(str(tmp_path / "m.onnx")).run(x)["y"]
    agree(cls.compute(node, list(x.values()))[0], want)


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("padding", [0, 1, 2])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_class(ops, tmp_path, mode, padding, align):
    rng = np.random.default_rng(mode * 10 + padding * 2 + align)
    x = {"input": rng.standard_normal((2, 3, 5, 7)).astype(np.float32),
         "grid": rng.uniform(-1.4, 1.4, (2, 4, 6, 2)).astype(np.float32)}
    node = one_node_model(tmp_path / "g.onnx", ops.GRID_SAMPLE_TYPE, x, (2, 3, 4, 6), mode=mode, padding_mode=padding, align_corners=align,
                          convention=1)
    want = rkdeploy.load(str(tmp_path / "g.onnx")).run(x)["y"]
    got = ops.GridSample().compute(node, list(x.values()))[0]
    if mode == 1:
        # nearest: a coordinate within rounding of a pixel boundary may pick the other pixel.
        assert (np.isclose(got, want, rtol=0, atol=0)).mean() > 0.97
    else:
        agree(got, want)


def test_refusals(ops, tmp_path):
    x = {"input": np.zeros((1, 1, 2, 2), np.float32), "grid": np.zeros((1, 1, 1, 2), np.float32)}
    node = one_node_model(tmp_path / "b.onnx", ops.GRID_SAMPLE_TYPE, x, (1, 1, 1, 1), mode=2, padding_mode=0, align_corners=0, convention=1)
    with pytest.raises(NotImplementedError, match="bicubic"):
        ops.GridSample().compute(node, list(x.values()))
    node = one_node_model(tmp_path / "c.onnx", ops.GRID_SAMPLE_TYPE, x, (1, 1, 1, 1), mode=7, padding_mode=0, align_corners=0, convention=1)
    with pytest.raises(rkdeploy.InvalidError, match="attribute mode = 7 is not a known code"):
        rkdeploy.load(str(tmp_path / "c.onnx"))
