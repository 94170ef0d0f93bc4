#!/usr/bin/env python3
"""Hostile inputs (docs/cli.md, "Limits"): each case once crashed rkdeploy by a signal, hung it,
or made it print garbage or delete what it did not write. Every command here must end with a
named error and an exit status of 1..3 (or succeed where that is the right answer), within a
time limit, never by a signal.

Usage: test_hostile.py RKDEPLOY MODELS_DIR INT8_TFLITE
  MODELS_DIR: the tiny reference models (ctest fixture `models`); INT8_TFLITE: a small int8
  TFLite model with one [1, 5, 5, 2] int8 input named x (fuzz/corpus/tflite).
"""
import os
import resource
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

PHOTO = "/usr/lib/python3/dist-packages/skimage/data/astronaut.png"
failures = []
passed = 0


def run(args, timeout=60, limit_as=None):
    """(exit status or 'timeout' or 'signal N', stdout, stderr) of rkdeploy ARGS."""
    def limit():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    try:
        p = subprocess.run([RK] + args, capture_output=True, text=True, timeout=timeout, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return "timeout", "", ""
    rc = p.returncode if p.returncode >= 0 else "signal %d" % -p.returncode
    return rc, p.stdout, p.stderr


def expect(name, args, codes, want="", **kw):
    """The command ends with one of `codes`, with `want` in its stderr."""
    global passed
    rc, out, err = run(args, **kw)
    if rc not in codes:
        failures.append("%s: exit %s, wanted %s: %s" % (name, rc, codes, (err or out)[-400:]))
    elif want and want not in err:
        failures.append("%s: stderr lacks %r: %s" % (name, want, err[-400:]))
    else:
        passed += 1
    return rc, out, err


def save(nodes, inputs, outputs, inits, path):
    onnx.save(h.make_model(h.make_graph(nodes, "g", inputs, outputs, inits), opset_imports=[h.make_opsetid("", 17)]), path)


def main():
    global RK, passed
    RK, models, tflite = (os.path.abspath(a) for a in sys.argv[1:4])
    d = tempfile.mkdtemp(prefix="rkd_hostile_")
    os.chdir(d)
    f32 = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)

    # Strides 0: ONNX's own shape inference divided by them (SIGFPE) before rkdeploy's check.
    w = nh.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    save([h.make_node("Conv", ["x", "w"], ["y"], strides=[0, 1], name="c")], [f32("x", [1, 3, 8, 8])], [f32("y", None)], [w], "conv_s0.onnx")
    save([h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[1, 0], name="p")], [f32("x", [1, 3, 8, 8])],
         [f32("y", None)], [], "maxpool_s0.onnx")
    save([h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[0, 0], name="p")], [f32("x", [1, 3, 8, 8])],
         [f32("y", None)], [], "avgpool_s0.onnx")
    np.save("x.npy", np.zeros((1, 3, 8, 8), np.float32))
    for m in ("conv_s0", "maxpool_s0", "avgpool_s0"):
        expect(m + " inspect", ["inspect", m + ".onnx"], [2], "'strides' must be positive")
        expect(m + " run", ["run", m + ".onnx", "--input", "x=x.npy"], [2], "'strides' must be positive")

    # Integer Div and Mod: by zero an error; INT_MIN / -1 wraps (NumPy's answer), % -1 is 0.
    i32 = lambda n: h.make_tensor_value_info(n, T.INT32, [4])
    save([h.make_node("Div", ["a", "b"], ["z"], name="d")], [i32("a"), i32("b")], [i32("z")], [], "div.onnx")
    save([h.make_node("Mod", ["a", "b"], ["z"], name="m")], [i32("a"), i32("b")], [i32("z")], [], "mod.onnx")
    save([h.make_node("Mod", ["a", "b"], ["z"], name="m", fmod=1)], [i32("a"), i32("b")], [i32("z")], [], "fmod.onnx")
    a = np.array([7, -2147483648, 5, -9], np.int32)
    np.save("a.npy", a)
    np.save("b0.npy", np.array([2, 3, 0, 4], np.int32))
    np.save("bm1.npy", np.array([2, -1, -1, 4], np.int32))
    wanted = {"div": [3, -2147483648, -5, -2], "mod": [1, 0, 0, 3], "fmod": [1, 0, 0, -1]}
    for m, z in wanted.items():
        expect(m + " by zero", ["run", m + ".onnx", "--input", "a=a.npy", "--input", "b=b0.npy"], [2], "integer division by zero")
        rc, _, _ = expect(m + " by -1", ["run", m + ".onnx", "--input", "a=a.npy", "--input", "b=bm1.npy", "--output-dir", m], [0])
        if rc == 0 and np.load(os.path.join(m, "z.npy")).tolist() != z:
            failures.append("%s by -1: %s, wanted %s" % (m, np.load(os.path.join(m, "z.npy")).tolist(), z))

    # A huge declared input through every photo path: a named limit, not an abort.
    for name, side in (("huge", 100000), ("huge40", 2 ** 40)):
        save([h.make_node("Relu", ["images"], ["out"], name="r")], [f32("images", [1, 3, side, side])], [f32("out", None)], [], name + ".onnx")
    os.mkdir("calib")
    os.symlink(PHOTO, "calib/astronaut.png")
    expect("huge quantize --calib", ["quantize", "huge.onnx", "--calib", "calib", "-o", "q.onnx"], [2], "64 GiB tensor limit")
    expect("huge plan --image", ["plan", "huge.onnx", "--image", PHOTO, "--target", "rk3588-rkdeploy"], [2], "64 GiB tensor limit")
    expect("huge bench --image", ["bench", "huge.onnx", "--image", PHOTO], [2], "64 GiB tensor limit")
    expect("huge run --image", ["run", "huge.onnx", "--image", PHOTO], [2], "64 GiB tensor limit")
    for name in ("huge", "huge40"):
        rc, out, _ = expect(name + " inspect", ["inspect", name + ".onnx"], [0])
        if "executor    ok" in out:
            failures.append(name + " inspect: says the executor is ok")
    # Under the tensor limit but over the memory the process may use (ulimit -v 2 GiB).
    save([h.make_node("Relu", ["images"], ["out"], name="r")], [f32("images", [1, 3, 20000, 20000])], [f32("out", None)], [], "big.onnx")
    expect("big run --image under ulimit -v", ["run", "big.onnx", "--image", PHOTO], [2], "of memory", limit_as=2 << 30)

    # An int8 model under shrinking address-space limits: out of memory is an error, never a
    # signal (oneDNN's code generator crashes when an mmap is refused).
    np.save("x8.npy", np.zeros((1, 5, 5, 2), np.int8))
    for mib in (64, 128, 256, 320, 384, 448, 512, 768):
        for backend in ("int8", "sim"):
            expect("int8 model, ulimit -v %d MiB, %s" % (mib, backend), ["run", tflite, "--backend", backend, "--input", "x=x8.npy"],
                   [0, 1, 2], limit_as=mib << 20)

    # One byte of the int8 model changed at every position (a shape, an index, a scale): the
    # int8 and sim back ends check before they prepare (the float one always did).
    data = open(tflite, "rb").read()
    bad = []
    for pos in range(len(data)):
        m = bytearray(data)
        m[pos] = 0x7F if data[pos] != 0x7F else 0x00
        open("m.tflite", "wb").write(m)
        backend = ("int8", "sim")[pos % 2]
        rc, _, err = run(["run", "m.tflite", "--backend", backend, "--input", "x=x8.npy"], timeout=30)
        if rc not in (0, 1, 2, 3):
            bad.append("byte %d = 0x%02x, --backend %s: %s %s" % (pos, m[pos], backend, rc, err[-200:]))
    if bad:
        failures.append("%d of %d one-byte mutations:\n    %s" % (len(bad), len(data), "\n    ".join(bad[:10])))
    else:
        passed += 1

    # Files that are not regular files: refused at once, never read forever or blocked on.
    os.mkfifo("fifo.onnx")
    expect("inspect /dev/zero", ["inspect", "/dev/zero"], [2], "not a regular file", timeout=20)
    expect("regcmd decode /dev/urandom", ["regcmd", "decode", "/dev/urandom"], [2], "not a regular file", timeout=20)
    expect("inspect a FIFO", ["inspect", "fifo.onnx"], [2], "not a regular file", timeout=20)
    expect("run --input a FIFO", ["run", "conv_s0.onnx", "--input", "x=fifo.onnx"], [2], timeout=20)

    # Register commands: random bytes are not a buffer; an empty file holds none.
    open("random.bin", "wb").write(np.random.RandomState(5).bytes(4096))
    expect("regcmd decode random bytes", ["regcmd", "decode", "random.bin"], [2], "not a register-command buffer")
    open("empty.bin", "wb").close()
    expect("regcmd decode an empty file", ["regcmd", "decode", "empty.bin"], [2], "holds no register-command words")

    # A capture index whose fields have other JSON types (fuzz_capture's finding: an uncaught
    # exception, "rkdeploy: internal:" in the CLI).
    for i, index in enumerate(('{"format": 0}', '{"format": "rkdeploy-capture", "submits": [{"index": "x", "jobs": []}]}',
                               '{"format": "rkdeploy-capture", "submits": [{"jobs": [{"tasks": [{"problem": 7}]}]}]}')):
        os.makedirs("cap%d" % i)
        open("cap%d/index.json" % i, "w").write(index)
        expect("capture index %d" % i, ["regcmd", "decode", "cap%d" % i], [2], "index.json")

    # Options that mean nothing without --image are errors, not ignored.
    y = os.path.join(models, "yolov8n_arch_tiny")
    expect("run --json without --image", ["run", y + ".onnx", "--input", "images=" + y + ".input_images.npy", "--json"], [2], "--image")
    # A config without width/height takes the model's size (this model's input is not 640 x 640).
    open("cfg.json", "w").write('{"output": "yolo", "score_threshold": 0.5}')
    expect("run --config without width/height", ["run", y + ".onnx", "--image", PHOTO, "--config", "cfg.json"], [0])
    # A typo in --sim: one error, not one per NPU node.
    rc, _, err = expect("run --sim typo", ["run", tflite, "--backend", "sim", "--sim", "no_such_knob=1", "--input", "x=x8.npy"], [2])
    if err.count("rkdeploy:") != 1:
        failures.append("run --sim typo: %d error lines: %s" % (err.count("rkdeploy:"), err[-400:]))

    # Help names the whole command, the formats each command takes and --strategy's choices; the
    # yolo decoder's error on a model with another head points at --config.
    for sub, want in (("run", ["Usage: rkdeploy run", "TFLite", "sorted-bs-multiplier", "per-tensor"]),
                      ("sample grid", ["Usage: rkdeploy sample grid"]), ("inspect", ["TFLite"]), ("quantize", ["TFLite"]),
                      ("plan", ["TFLite"]), ("compile", ["int8 TFLite", "per-tensor"])):
        _, out, _ = run(["help"] + sub.split())
        missing = [w for w in want if w not in out]
        if missing:
            failures.append("help %s lacks %s" % (sub, missing))
        else:
            passed += 1
    d = os.path.join(models, "deimv2_s_arch_tiny")
    open("yolo.json", "w").write('{"output": "yolo"}')
    expect("a yolo config on a model with three outputs", ["run", d + ".onnx", "--image", PHOTO, "--config", "yolo.json"], [2],
           "needs --config CFG.json")

    # A file name that is not UTF-8: with --json the error is still the real one (the bad bytes as
    # U+FFFD), not the JSON library's complaint; without it, a control character in a name (an
    # escape sequence) is shown as \xNN, never sent to the terminal.
    import json
    p = subprocess.run([RK.encode(), b"inspect", b"missing-\xff\xfe.onnx", b"--json"], capture_output=True, timeout=60)
    try:
        e = json.loads(p.stderr.decode("utf-8"))["error"]
        ok = p.returncode == 1 and e["kind"] == "io" and "missing-\ufffd\ufffd.onnx" in e["message"] and "json.exception" not in e["message"]
    except (ValueError, KeyError, UnicodeDecodeError) as x:
        ok, e = False, "%r: %r" % (x, p.stderr)
    if ok:
        passed += 1
    else:
        failures.append("a non-UTF-8 file name with --json: exit %s, %s" % (p.returncode, e))
    p = subprocess.run([RK.encode(), b"inspect", b"esc-\x1b[31m.onnx"], capture_output=True, timeout=60)
    if p.returncode == 1 and b"\x1b" not in p.stderr and b"esc-\\x1b[31m.onnx" in p.stderr:
        passed += 1
    else:
        failures.append("an escape sequence in a file name reached the terminal: exit %s, %r" % (p.returncode, p.stderr))

    for f in failures:
        print("FAIL:", f)
    print("hostile: %d passed, %d failed" % (passed, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
