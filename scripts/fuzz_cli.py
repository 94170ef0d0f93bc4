#!/usr/bin/env python3
"""CLI argument fuzzer (docs/fuzzing.md): random argument vectors over every subcommand.

Each vector is a subcommand (or a near miss of one) followed by random tokens: the
subcommand's own options (read from `rkdeploy help SUBCOMMAND`), other subcommands' options,
and values from a pool of edge cases (negative, zero, huge, NaN, empty, non-numbers) and of
paths (real tiny models and tensors, a junk file, a folder, a missing file, /dev/null,
NAME=FILE forms). Every run must end with an exit status of at most 3 (docs/cli.md), print
its error with the `rkdeploy:` prefix (or as JSON with --json), and - with a sanitizer build -
print no sanitizer report. A run that exceeds the time limit is killed and counted, not
failed (a random `--runs 1000000` is slow, not wrong).

Usage: fuzz_cli.py RKDEPLOY MODELS_DIR [--iterations N] [--seed S] [--timeout SECONDS]
       [--log FILE]   (MODELS_DIR: the tiny reference models of `make models` / ctest)
Exit status 1 when any run broke a rule; the findings are printed with their argument vector.
"""
import argparse
import collections
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

SANITIZER = re.compile(r"ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer")
SUBCOMMANDS = ["inspect", "run", "quantize", "accuracy", "analyze", "compile", "plan", "bench", "regcmd decode", "regcmd diff",
               "sample grid", "sample deform-attn", "help", "demo"]


def options_of(rk, sub):
    """The long and short options `rkdeploy help SUB` lists."""
    out = subprocess.run([rk, "help"] + sub.split(), capture_output=True, text=True).stdout
    return sorted(set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", out)) - {"-h", "--help"})


def fixtures(d, models):
    """Real inputs, broken inputs and awkward paths in d."""
    import numpy as np
    # Copies only: a random vector may name any of these as an output, and an output named
    # by the user replaces a regular file (docs/cli.md), so nothing outside d may be listed.
    for f in os.listdir(models):
        if f.startswith(("deimv2_s_arch_tiny.", "yolov8n_arch_tiny.")):
            shutil.copy(os.path.join(models, f), d)
    m = os.path.join(d, "deimv2_s_arch_tiny")
    y = os.path.join(d, "yolov8n_arch_tiny")
    np.save(os.path.join(d, "x.npy"), np.random.RandomState(0).randn(1, 3, 8, 8).astype(np.float32))
    np.save(os.path.join(d, "g.npy"), np.random.RandomState(1).uniform(-1, 1, (1, 4, 4, 2)).astype(np.float32))
    np.save(os.path.join(d, "nan.npy"), np.full((1, 3, 4, 4), np.nan, np.float32))
    np.save(os.path.join(d, "empty.npy"), np.zeros((0, 3), np.float32))
    np.savez(os.path.join(d, "calib.npz"), images=np.load(m + ".input_images.npy"),
             orig_target_sizes=np.load(m + ".input_orig_target_sizes.npy"))
    with open(os.path.join(d, "junk.onnx"), "wb") as f:
        f.write(b"\x08\x07junk" * 50)
    with open(os.path.join(d, "cfg.json"), "w") as f:
        f.write('{"width": 64, "height": 64, "output": "yolo"}')
    with open(os.path.join(d, "bad.json"), "w") as f:
        f.write('{"width": -1, "nms_iou": 7}')
    os.makedirs(os.path.join(d, "adir"), exist_ok=True)
    paths = [m + ".onnx", y + ".onnx", m + ".input_images.npy", m + ".input_orig_target_sizes.npy", "x.npy", "nan.npy",
             "empty.npy", "calib.npz", "junk.onnx", "cfg.json", "bad.json", "adir", "missing.onnx", "/dev/null", ".", "",
             "out.npy", "out_dir", "nodir/out.onnx"]
    photo = "/usr/lib/python3/dist-packages/skimage/data/chelsea.png"
    if os.path.exists(photo):
        shutil.copy(photo, d)
        paths.append(os.path.join(d, "chelsea.png"))
    tfl = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus", "tflite", "int8_conv_per_axis.tflite")
    if os.path.exists(tfl):
        shutil.copy(tfl, d)
        paths.append(os.path.join(d, "int8_conv_per_axis.tflite"))
    return paths, m


VALUES = ["0", "1", "2", "-1", "3", "7", "100", "1024", "1025", "100000", "1000000", "2147483648", "-2147483649", "1e9", "nan",
          "inf", "-inf", "0.5", "99.99", "", "abc", "--", "-", "1,2", "80x80,40x40", "3,6,3", "2x2,1x1", "1,1", "0x0", "x",
          "coco", "ids", "voc", "cpu", "int8", "sim", "device", "minmax", "percentile", "kl", "mse", "int8", "uint8",
          "per-tensor", "sorted-bs-multiplier", "hybrid", "all", "as-is", "discrete", "rk3588", "rk3588-rkdeploy", "rk3576",
          "bilinear", "nearest", "bicubic", "zeros", "border", "reflection", "fast", "reference", "default", "discrete_fixed",
          "onnx_float", "tflite_double_rounding", "rknpu_out_cvt", "mac_saturate=1", "nosuch=1", "A" * 5000, "\u00e9\u00e8"]


def templates(m, paths):
    """Well-formed commands (mutated by vector() so that runs get past the parser)."""
    ins = ["--input", f"images={m}.input_images.npy", "--input", f"orig_target_sizes={m}.input_orig_target_sizes.npy"]
    tfl = [p for p in paths if p.endswith(".tflite")]
    t = [["inspect", m + ".onnx"], ["inspect", m + ".onnx", "--json"],
         ["run", m + ".onnx"] + ins, ["run", m + ".onnx"] + ins + ["--output-dir", "od", "--profile", "--top", "3"],
         ["run", m + ".onnx", "--image", os.path.join(os.path.dirname(m), "chelsea.png"), "--json"],
         ["quantize", m + ".onnx", "--calib", "calib.npz", "-o", "q.onnx"],
         ["plan", m + ".onnx", "--target", "rk3588-rkdeploy", "--runs", "1", "--warmup", "0"] + ins,
         ["bench", m + ".onnx", "--runs", "2", "--warmup", "0"] + ins,
         ["accuracy", m + ".onnx", m + ".onnx"] + ins,
         ["sample", "grid", "--input", "x.npy", "--grid", "g.npy", "-o", "y.npy"],
         ["help", "run"], ["--version"]]
    if tfl:
        t += [["compile", tfl[0], "-o", "cc"], ["inspect", tfl[0]], ["run", tfl[0], "--input", "x=x.npy", "--backend", "int8"]]
    return t


def mutate(rng, argv, subs_opts, paths):
    argv = list(argv)
    every = sorted({o for v in subs_opts.values() for o in v})
    for _ in range(rng.randint(0, 3)):
        r = rng.random()
        k = rng.randrange(1, len(argv)) if len(argv) > 1 else 0
        if r < 0.3 and len(argv) > 1:
            argv[k] = rng.choice(VALUES + paths)          # replace a token
        elif r < 0.45 and len(argv) > 1:
            del argv[k]                                     # drop one
        elif r < 0.8:
            argv[k:k] = [rng.choice(every), rng.choice(VALUES + paths)]  # insert an option with a value
        else:
            argv.insert(k, rng.choice(VALUES))
    return argv


def vector(rng, subs_opts, paths, m):
    if rng.random() < 0.6:
        return mutate(rng, rng.choice(templates(m, paths)), subs_opts, paths)
    sub = rng.choice(SUBCOMMANDS + ["rnu", "nosuch", "--version", "--quiet", "-q"])
    argv = sub.split()
    own = subs_opts.get(sub, [])
    every = sorted({o for v in subs_opts.values() for o in v})
    pool_paths = paths + [f"images={m}.input_images.npy", f"orig_target_sizes={m}.input_orig_target_sizes.npy", "x=x.npy",
                          "x=missing.npy", "=x.npy", "x=", "images=nan.npy"]
    if rng.random() < 0.8:
        argv.append(rng.choice(paths))  # the positional model or file
    for _ in range(rng.randint(0, 8)):
        r = rng.random()
        if r < 0.45 and own:
            opt = rng.choice(own)
            argv.append(opt)
            if rng.random() < 0.85:
                argv.append(rng.choice(pool_paths if rng.random() < 0.4 else VALUES))
        elif r < 0.55:
            argv.append(rng.choice(every))
        elif r < 0.8:
            argv.append(rng.choice(pool_paths))
        else:
            argv.append(rng.choice(VALUES))
    if rng.random() < 0.15:
        argv.append("--json")
    return argv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rkdeploy")
    ap.add_argument("models")
    ap.add_argument("--iterations", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--log")
    a = ap.parse_args()
    rk = os.path.abspath(a.rkdeploy)
    rng = random.Random(a.seed)
    subs_opts = {s: options_of(rk, s) for s in SUBCOMMANDS}
    codes = collections.Counter()
    findings, slow = [], []
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    start = time.time()
    with tempfile.TemporaryDirectory() as d:
        paths, m = fixtures(d, os.path.abspath(a.models))
        for i in range(a.iterations):
            argv = vector(rng, subs_opts, paths, m)
            work = os.path.join(d, "w")
            os.makedirs(work, exist_ok=True)
            for f in ("x.npy", "g.npy", "nan.npy", "empty.npy", "calib.npz", "junk.onnx", "cfg.json", "bad.json"):
                if not os.path.exists(os.path.join(work, f)):
                    shutil.copy(os.path.join(d, f), work)
            os.makedirs(os.path.join(work, "adir"), exist_ok=True)
            try:
                p = subprocess.run([rk] + argv, cwd=work, capture_output=True, text=True, errors="replace", timeout=a.timeout,
                                   env=env, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                codes["timeout"] += 1
                slow.append(argv)
                continue
            codes[p.returncode] += 1
            problem = None
            if SANITIZER.search(p.stderr):
                problem = "sanitizer report: " + SANITIZER.search(p.stderr).group(0)
            elif p.returncode < 0 or p.returncode > 3:
                problem = f"exit status {p.returncode}"
            elif argv[:2] == ["regcmd", "diff"] and p.returncode == 1 and not p.stderr and p.stdout:
                pass  # the files differ: diff(1)'s status 1, documented in docs/cli.md
            elif p.returncode != 0 and "rkdeploy: " not in p.stderr and '"error"' not in p.stderr:
                problem = "error without the rkdeploy: prefix"
            if problem:
                findings.append((problem, argv, p.stderr[-600:]))
            if a.log and i % 50 == 0:
                with open(a.log, "a") as f:
                    f.write(f"{i} {time.time() - start:.0f}s {dict(codes)} findings {len(findings)}\n")
            shutil.rmtree(work, ignore_errors=True)
    secs = time.time() - start
    for argv in slow:
        print(f"TIMEOUT (killed after {a.timeout:g} s): {argv!r}")
    for problem, argv, err in findings:
        print(f"FINDING: {problem}\n  argv: {argv!r}\n  stderr: {err.strip()[-400:]}")
    summary = (f"{a.iterations} argument vectors in {secs:.0f} s (seed {a.seed}): exit statuses "
               f"{dict(sorted(codes.items(), key=lambda kv: str(kv[0])))}, {len(slow)} timed out (> {a.timeout:g} s), "
               f"{len(findings)} finding(s)")
    print(summary)
    if a.log:
        with open(a.log, "a") as f:
            f.write(summary + "\n")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
