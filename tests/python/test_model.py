"""rkdeploy.Model (load + run + detect) against the command line, and the error contract."""
import os
import threading

import numpy as np
import pytest

import rkdeploy
from conftest import PHOTO, same_arrays


def cli_outputs(cli, tmp_path, model, inputs, *args):
    """`rkdeploy run MODEL --input NAME=FILE.npy ... --output-dir D` as arrays."""
    specs = []
    for name, a in inputs.items():
        f = tmp_path / f"in.{name}.npy"
        np.save(f, a)
        specs += ["--input", f"{name}={f}"]
    out = tmp_path / "out"
    cli("run", model, *specs, "--output-dir", out, *args)
    return {f[:-4]: np.load(out / f) for f in os.listdir(out)}


def test_run_equals_cli_deim(cli, models, tmp_path):
    """Two inputs (images, orig_target_sizes) as a dict; every output bit for bit."""
    stem = os.path.join(models, "deimv2_s_arch_tiny")
    inputs = {n: np.load(f"{stem}.input_{n}.npy") for n in ("images", "orig_target_sizes")}
    m = rkdeploy.load(stem + ".onnx")
    assert [i.name for i in m.inputs] == ["images", "orig_target_sizes"]
    got = m.run(inputs)
    want = cli_outputs(cli, tmp_path, stem + ".onnx", inputs)
    assert sorted(got) == sorted(want)
    for k in want:
        assert same_arrays(got[k], want[k]), k


@pytest.mark.parametrize("backend", ["int8", "sim"])
def test_run_equals_cli_quantized(cli, nanodet, tmp_path, backend):
    """The quantized NanoDet on the integer kernels and on the NPU simulator."""
    got = rkdeploy.load(nanodet.qdq, backend=backend).run(nanodet.input)
    want = cli_outputs(cli, tmp_path, nanodet.qdq, {"input_1": nanodet.input}, "--backend", backend)
    assert sorted(got) == sorted(want)
    for k in want:
        assert same_arrays(got[k], want[k]), k


def test_run_one_array_and_layouts(cli, models, tmp_path):
    """One array for a one-input model; a non-contiguous input is converted; outputs are
    rkdeploy's buffers (no copy), fresh per run."""
    stem = os.path.join(models, "yolov8n_arch_tiny")
    x = np.load(stem + ".input_images.npy")
    m = rkdeploy.Model(stem + ".onnx")
    a = m.run(x)["output0"]
    assert same_arrays(a, cli_outputs(cli, tmp_path, stem + ".onnx", {"images": x})["output0"])
    assert not a.flags.owndata and a.base is not None
    t = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    assert not t.flags.c_contiguous
    b = m.run({"images": t})["output0"]
    assert same_arrays(a, b)
    assert a.ctypes.data != b.ctypes.data  # the first run's array is not overwritten


def test_errors_name_the_cause(models, tmp_path, cli):
    stem = os.path.join(models, "yolov8n_arch_tiny")
    # The command line's message, after "rkdeploy: io: ".
    with pytest.raises(rkdeploy.IoError) as e:
        rkdeploy.load(str(tmp_path / "missing.onnx"))
    p = cli("run", tmp_path / "missing.onnx", "--input", f"images={stem}.input_images.npy", check=False)
    assert p.returncode != 0 and str(e.value) in p.stderr
    assert isinstance(e.value, OSError) and e.value.kind == "io"
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    with pytest.raises(rkdeploy.InvalidError, match="bad.onnx"):
        rkdeploy.load(str(bad))
    m = rkdeploy.load(stem + ".onnx")
    x = np.load(stem + ".input_images.npy")
    with pytest.raises(rkdeploy.InvalidError, match="input 'images': dtype int32, the model expects float32"):
        m.run(x.astype(np.int32))
    with pytest.raises(rkdeploy.InvalidError, match=r"input 'images': dtype float64 is not one rkdeploy reads \(float32, .*astype"):
        m.run(x.astype(np.float64))
    with pytest.raises(rkdeploy.InvalidError, match="input 'images': shape"):
        m.run(x[:, :, :8])
    with pytest.raises(rkdeploy.InvalidError, match="no such input"):
        m.run({"imgs": x})
    with pytest.raises(rkdeploy.InvalidError, match="not one of cpu, int8, sim, device"):
        rkdeploy.load(stem + ".onnx", backend="gpu")
    with pytest.raises(rkdeploy.InvalidError, match="need --backend device"):
        rkdeploy.load(stem + ".onnx", backend="sim", cores=2)
    with pytest.raises(rkdeploy.InvalidError, match="need --backend sim"):
        rkdeploy.load(stem + ".onnx", strategy="per-channel")
    with pytest.raises(rkdeploy.InvalidError, match="strategy"):
        rkdeploy.load(stem + ".onnx", backend="sim", strategy="fastest")
    with pytest.raises(TypeError, match="several inputs"):
        rkdeploy.load(os.path.join(models, "deimv2_s_arch_tiny.onnx")).run(x)


def test_run_releases_the_gil(models):
    """Another Python thread runs while the model runs (the binding drops the GIL). The worker
    runs until the main thread has looked often enough (at most 200 runs): with the GIL held,
    the main thread could look only between the flag and the call, a handful of times."""
    stem = os.path.join(models, "deimv2_s_arch_tiny")
    inputs = {n: np.load(f"{stem}.input_{n}.npy") for n in ("images", "orig_target_sizes")}
    m = rkdeploy.load(stem + ".onnx", threads=1)
    inside, enough, stop = threading.Event(), threading.Event(), threading.Event()
    seen = 0

    def worker():
        for _ in range(200):
            if enough.is_set():
                break
            inside.set()
            m.run(inputs)
            inside.clear()
        stop.set()

    t = threading.Thread(target=worker)
    t.start()
    while not stop.is_set():
        if inside.is_set():
            seen += 1
            if seen > 1000:
                enough.set()
    t.join()
    assert seen > 1000, seen


def test_detect_equals_cli(nanodet, cli):
    want = cli.json("run", nanodet.qdq, "--image", PHOTO, "--config", nanodet.config, "--backend", "sim")["detections"]
    m = rkdeploy.load(nanodet.qdq, backend="sim")
    got = m.detect(PHOTO, nanodet.config)
    assert [(d.label, d.name, d.score, [d.x0, d.y0, d.x1, d.y1]) for d in got] == [
        (w["label"], w["class"], pytest.approx(w["score"], rel=0, abs=0), w["box_xyxy"]) for w in want]
    assert m.placement and m.placement[0].startswith("npu: ")
    # A photo as an RGB array gives the same.
    from skimage import io
    assert m.detect(io.imread(PHOTO)[:, :, :3], nanodet.config) == got
