"""The workflows through Python against the same workflows through the command line: the files
they write byte for byte, the reports field for field."""
import json
import os

import numpy as np
import pytest

import rkdeploy
from conftest import PHOTO, same_arrays


def test_quantize_folder_equals_cli(nanodet, tmp_path):
    out = tmp_path / "py.qdq.onnx"
    stages = []
    r = rkdeploy.quantize(nanodet.model, nanodet.calib, str(out), config=nanodet.config, method="percentile",
                          progress=lambda s, d, t: stages.append((s, d, t)))
    assert out.read_bytes() == open(nanodet.qdq, "rb").read()
    assert r["samples"] == len(os.listdir(nanodet.calib)) and r["weights"] == "per-channel"
    # Progress: every stage ends with done == total.
    ends = {s for s, d, t in stages if d == t}
    assert {s for s, _, _ in stages} == ends and len(ends) >= 2


def test_quantize_arrays_equal_cli_npz(nanodet, cli, tmp_path):
    """An array of samples, a dict, a list and a generator of arrays: the same file as the
    command line's --calib FILE.npz."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, size=(3,) + nanodet.input.shape[1:]).astype(np.float32)
    np.savez(tmp_path / "calib.npz", input_1=x)
    cli("quantize", nanodet.model, "--calib", tmp_path / "calib.npz", "-o", tmp_path / "cli.onnx")
    want = (tmp_path / "cli.onnx").read_bytes()
    for i, calib in enumerate([x, {"input_1": x}, [x[k:k + 1] for k in range(3)], (x[k:k + 1] for k in range(3)),
                               [{"input_1": x[k:k + 1]} for k in range(3)]]):
        out = tmp_path / f"py{i}.onnx"
        r = rkdeploy.quantize(nanodet.model, calib, str(out))
        assert r["samples"] == 3
        assert out.read_bytes() == want, type(calib)
    # images= caps the samples as --images does.
    r = rkdeploy.quantize(nanodet.model, x, str(tmp_path / "two.onnx"), images=2)
    assert r["samples"] == 2


def test_quantize_errors(nanodet, tmp_path):
    out = tmp_path / "q.onnx"
    with pytest.raises(rkdeploy.InvalidError, match="sample 0 has no tensor named like the model input 'input_1'"):
        rkdeploy.quantize(nanodet.model, [{"x": nanodet.input}], str(out))
    with pytest.raises(rkdeploy.InvalidError, match="uint8"):
        rkdeploy.quantize(nanodet.model, nanodet.input, str(out), dtype="uint8", per_channel=True)
    with pytest.raises(rkdeploy.InvalidError, match="percentile applies to method 'percentile' only"):
        rkdeploy.quantize(nanodet.model, nanodet.input, str(out), percentile=99.9)
    with pytest.raises(rkdeploy.InvalidError, match="NaN|non-finite|not finite"):
        rkdeploy.quantize(nanodet.model, np.full_like(nanodet.input, np.nan), str(out))

    # An exception in the progress callback stops the work there and is raised; nothing written.
    def boom(stage, done, total):
        raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        rkdeploy.quantize(nanodet.model, nanodet.input, str(out), progress=boom)
    assert not out.exists() and os.listdir(tmp_path) == []


def test_evaluate_equals_cli(nanodet, cli):
    want = cli.json("eval", nanodet.qdq, "--images", nanodet.calib, "--reference", nanodet.model, "--config", nanodet.config, "--backend",
                    "int8", "--max-images", 4)
    got = rkdeploy.evaluate(nanodet.qdq, nanodet.calib, reference=nanodet.model, config=nanodet.config, backend="int8", max_images=4)
    assert got["metrics"] == want["metrics"]
    assert got["matched50"] == want["matched50"] and got["images"] == want["images"] == 4
    assert got["ground_truth"]["boxes"] == want["ground_truth"]["boxes"]
    assert [c["AP50"] for c in got["categories"]] == [c["AP50"] for c in want["categories"]]
    assert len(got["detections"]) == want["detections"]
    with pytest.raises(rkdeploy.InvalidError, match="one of annotations"):
        rkdeploy.evaluate(nanodet.qdq, nanodet.calib)


def test_accuracy_and_analyze_equal_cli(nanodet, cli, tmp_path):
    np.save(tmp_path / "x.npy", nanodet.input)
    spec = f"input_1={tmp_path / 'x.npy'}"
    want = cli.json("accuracy", nanodet.model, nanodet.qdq, "--input", spec)
    got = rkdeploy.accuracy(nanodet.model, nanodet.qdq, inputs=nanodet.input, html=str(tmp_path / "a.html"))
    assert got == want
    assert (tmp_path / "a.html").read_text().startswith("<!DOCTYPE html>")
    want = cli.json("analyze", nanodet.qdq, "--input", spec, "--strategy", "per-channel")
    got = rkdeploy.analyze(nanodet.qdq, inputs={"input_1": nanodet.input}, strategies=["per-channel"])
    assert got == want


def test_compile_and_runtime(nanodet, cli, tmp_path):
    """compile -> Runtime: the artifact's outputs equal `run --backend sim` on the QDQ file bit
    for bit; the input buffer is written in place; detections as the command line's."""
    rkd = tmp_path / "m.rkd"
    c = rkdeploy.compile(nanodet.qdq, str(rkd), config=nanodet.config)
    cli("compile", nanodet.qdq, "--config", nanodet.config, "-o", tmp_path / "cli.rkd")
    assert rkd.read_bytes() == (tmp_path / "cli.rkd").read_bytes()
    assert c["npu_nodes"] > 0 and c["file_bytes"] == rkd.stat().st_size
    rt = rkdeploy.Runtime(str(rkd))
    assert [(i.name, i.shape, i.dtype) for i in rt.inputs] == [("input_1", (1, 3, 416, 416), "float32")]
    want = rkdeploy.load(nanodet.qdq, backend="sim").run(nanodet.input)
    got = rt.run({"input_1": nanodet.input})
    assert sorted(got) == sorted(want)
    for k in want:
        assert same_arrays(got[k], want[k]), k
    buf = rt.input_buffer("input_1")
    buf[...] = 0
    zero = rt.run()
    buf[...] = nanodet.input
    again = rt.run()
    assert any(not same_arrays(zero[k], want[k]) for k in want)
    assert all(same_arrays(again[k], want[k]) for k in want)
    assert all(same_arrays(got[k], want[k]) for k in want)  # copies: later runs left them alone
    dets = cli.json("run", rkd, "--image", PHOTO, "--backend", "sim")["detections"]
    assert [(d.label, d.score) for d in rt.detect(PHOTO)] == [(d["label"], d["score"]) for d in dets]
    with pytest.raises(rkdeploy.InvalidError, match="input 'input_1'"):
        rt.run(nanodet.input.astype(np.int32))
    with pytest.raises(rkdeploy.IoError, match="missing.rkd"):
        rkdeploy.Runtime(str(tmp_path / "missing.rkd"))
    with pytest.raises(rkdeploy.InvalidError, match="backend 'cpu'"):
        rkdeploy.Runtime(str(rkd), backend="cpu")
    # The right byte count in another shape is refused, not run on scrambled data.
    with pytest.raises(rkdeploy.InvalidError, match=r"input 'input_1': shape \(1, 416, 416, 3\), the model expects \(1, 3, 416, 416\)"):
        rt.run(np.ascontiguousarray(nanodet.input.transpose(0, 2, 3, 1)))
    with pytest.raises(rkdeploy.InvalidError, match="shape"):
        rt.run(nanodet.input.reshape(-1))
    # NaN inputs: refused unless allow_nonfinite.
    nan = nanodet.input.copy()
    nan.flat[5] = np.nan
    with pytest.raises(rkdeploy.InvalidError, match=r"input 'input_1': element \[0, 0, 0, 5\] is NaN"):
        rt.run(nan)
    rkdeploy.Runtime(str(rkd), allow_nonfinite=True).run(nan)
    # A float photo in [0, 1] is refused with how to convert it, not cast to black.
    photo = np.zeros((64, 48, 3), np.float32)
    with pytest.raises(rkdeploy.InvalidError, match="must be uint8 RGB in 0..255"):
        rt.detect(photo)
    with pytest.raises(rkdeploy.InvalidError, match="must be uint8 RGB in 0..255"):
        rkdeploy.load(nanodet.qdq).detect(photo, nanodet.config)
    with pytest.raises(rkdeploy.InvalidError, match="options.threads 100000: must be 0"):
        rkdeploy.Runtime(str(rkd), threads=100000)


def test_threads_share_a_model_and_a_runtime(nanodet, tmp_path):
    """Python threads sharing one Model or Runtime: each call waits for the other (no crash),
    and every thread gets the single-threaded answer."""
    import threading

    rkd = tmp_path / "t.rkd"
    rkdeploy.compile(nanodet.qdq, str(rkd), config=nanodet.config)
    for obj in (rkdeploy.Runtime(str(rkd)), rkdeploy.load(nanodet.qdq, backend="sim")):
        want = obj.run(nanodet.input)
        bad = []

        def work():
            for _ in range(3):
                got = obj.run(nanodet.input)
                if not all(same_arrays(got[k], want[k]) for k in want):
                    bad.append(type(obj).__name__)

        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert bad == []


def test_options_are_bounded(nanodet, tmp_path):
    """Out-of-range options are refused as the command line refuses them."""
    out = str(tmp_path / "q.onnx")
    with pytest.raises(rkdeploy.InvalidError, match="percentile 200"):
        rkdeploy.quantize(nanodet.model, nanodet.input, out, method="percentile", percentile=200)
    with pytest.raises(rkdeploy.InvalidError, match="auto-hybrid -1"):
        rkdeploy.quantize(nanodet.model, nanodet.input, out, auto_hybrid=-1)
    with pytest.raises(rkdeploy.InvalidError, match="threads -3"):
        rkdeploy.quantize(nanodet.model, nanodet.input, out, threads=-3)
    with pytest.raises(rkdeploy.InvalidError, match="batch 1099511627776: must be 1 to 65536"):
        rkdeploy.load(nanodet.qdq, batch=2**40)
    with pytest.raises(rkdeploy.InvalidError, match="threads 100000"):
        rkdeploy.load(nanodet.qdq, threads=100000)
    assert os.listdir(tmp_path) == []


def test_endless_calibration_and_reentrant_progress(nanodet, tmp_path):
    """An endless iterator of samples stops at `images`; a progress callback that calls rkdeploy
    is refused (it would wait for itself), and nothing is written."""
    import itertools

    out = tmp_path / "q.onnx"
    q = rkdeploy.quantize(nanodet.model, itertools.repeat(nanodet.input), str(out), images=2)
    assert q["samples"] == 2 and out.exists()
    out.unlink()

    def nested(stage, done, total):
        rkdeploy.load(nanodet.qdq)

    with pytest.raises(rkdeploy.InvalidError, match="from inside a progress callback"):
        rkdeploy.quantize(nanodet.model, nanodet.input, str(out), progress=nested)
    assert not out.exists()


@pytest.mark.parametrize("signum,exc", [("SIGALRM", KeyboardInterrupt), ("SIGTERM", SystemExit)])
def test_signal_stops_calibration_at_its_next_step(nanodet, tmp_path, signum, exc):
    """A signal whose handler raises (Ctrl-C's KeyboardInterrupt; a SIGTERM handler that calls
    sys.exit, as docs/python.md suggests) arriving while the C++ work runs stops the work at its
    next progress point: the calibration does not run to its end, the exception is raised, and
    neither the output nor its temporary is left. The first signal is sent at the first progress
    report; the handler raises only where rkdeploy checks for signals: run inside the progress
    callable (Python code), it sends the signal again."""
    import signal
    import threading

    sig = getattr(signal, signum)
    x = np.repeat(nanodet.input, 80, axis=0)
    out = tmp_path / "q.onnx"
    steps = []

    def record(stage, done, total):
        steps.append((stage, done, total))
        if len(steps) == 1:
            send(0)  # the first signal once the calibration runs, whatever the host's speed

    def send(delay):
        t = threading.Timer(delay, os.kill, (os.getpid(), sig))
        t.daemon = True
        t.start()

    def handler(signum, frame):
        if frame is not None and frame.f_code is record.__code__:
            send(0.01)
            return
        raise exc(1)

    before = signal.signal(sig, handler)
    try:
        with pytest.raises(exc):
            rkdeploy.quantize(nanodet.model, x, str(out), images=80, progress=record)
    finally:
        signal.signal(sig, before)
    calibrating = [d for s, d, t in steps if s == "calibrating"]
    assert calibrating
    assert calibrating[-1] < 80 and all(s == "calibrating" for s, _, _ in steps), steps[-1]
    assert os.listdir(tmp_path) == []


def test_plan_bench_export(nanodet, models, cli, tmp_path):
    stem = os.path.join(models, "deimv2_s_arch_tiny")
    inputs = {n: np.load(f"{stem}.input_{n}.npy") for n in ("images", "orig_target_sizes")}
    specs = sum((["--input", f"{n}={stem}.input_{n}.npy"] for n in inputs), [])
    want = cli.json("plan", stem + ".onnx", "--target", "rk3588-rknn-2.3.2", *specs, "--runs", 1, "--warmup", 0)
    got = rkdeploy.plan(stem + ".onnx", target="rk3588-rknn-2.3.2", inputs=inputs, runs=1, warmup=0)
    keys = ("variant", "planned", "executable", "failures")
    assert [[p[k] for k in keys] for p in got["variants"]] == [[p[k] for k in keys] for p in want["variants"]]
    assert got["schema"] == want["schema"] and got["target"] == want["target"]
    b = rkdeploy.bench(nanodet.qdq, backend="sim", image=PHOTO, config=nanodet.config, runs=2, warmup=1)
    assert b["forward_ms"]["p50"] > 0 and b["end_to_end_ms"]["p50"] > 0 and b["environment"]["cpu"]
    rkdeploy.export(stem + ".onnx", str(tmp_path / "py.onnx"))
    cli("export", stem + ".onnx", "-o", tmp_path / "cli.onnx")
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()


def test_outputs_keep_the_destination_on_error(nanodet, tmp_path):
    """A failing call leaves an existing destination as it was (core/output.h)."""
    out = tmp_path / "keep.onnx"
    out.write_bytes(b"before")
    with pytest.raises(rkdeploy.Error):
        rkdeploy.quantize(nanodet.model, [{"x": nanodet.input}], str(out))
    assert out.read_bytes() == b"before"
    json.dumps(rkdeploy.environment())
