"""tools/gpu_check.py (``make gpu-check``): its one-line answer without CUDA, and a CPU-vs-CPU
self-test of its comparison machinery (every difference 0)."""

import importlib.util
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "gpu_check.py"


def run(*args, timeout=120):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, timeout=timeout,
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present: the full check would run")
def test_without_cuda_one_line_and_exit_0():
    done = run()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and "no CUDA device" in lines[0] and "nothing checked" in lines[0]
    assert done.stderr.strip() == ""


def test_cpu_self_test_prints_the_tables_with_zero_differences():
    done = run("--device", "cpu", "--quick")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for name in ("att_svm (nuc)", "norm_svm (spectral)", "ngd_relu_head", "train (W, ngd)",
                 "train (KQ, polyak)", "train (p, mirror)", "train (KQ, spectral)",
                 "regularization_path (KQ)", "regularization_path (W, reference, restarts=2)",
                 "A3 training, W", "A4 grid", "A6 closed form", "A5 Att-SVM solves"):
        assert name in out, name
    rows = re.findall(r"^(\S.*?)\s{2,}(\d\.\de[+-]\d\d)\s{2,}(\S+)", out, flags=re.M)
    assert len(rows) >= 40                                         # one per compared function
    assert all(float(diff) <= 1e-12 and status == "ok" for _, diff, status in rows), rows
    for method in ("gd", "ngd", "polyak", "mirror", "spectral"):   # every method, every parameterization
        for kind in ("W", "KQ", "p"):
            assert f"train ({kind}, {method})" in out
    assert "ERROR" not in out and "gpu-check: OK" in out
    ratios = re.findall(r"^A\d.*\s(\d+\.\d\d)$", out, flags=re.M)
    assert len(ratios) == 5


def test_relative_difference(gpu_check):
    rd = gpu_check.relative_difference
    a = torch.tensor([[1.0, -2.0], [4.0, 0.5]], dtype=torch.float64)
    assert rd(a, a.clone()) == 0.0
    assert math.isclose(rd(a, a + torch.tensor([[0.0, 0.0], [4e-3, 0.0]], dtype=torch.float64)), 1e-3)
    assert rd({"x": a, "n": 3}, {"x": a, "n": 3}) == 0.0
    assert rd([torch.tensor([1, 2, 3, 4])], [torch.tensor([1, 2, 0, 4])]) == 0.25
    assert rd(a, a[:1]) == math.inf
    nan = torch.tensor([float("nan"), 1.0], dtype=torch.float64)
    assert rd(nan, nan.clone()) == 0.0
    assert rd(nan, torch.tensor([0.0, 1.0], dtype=torch.float64)) == math.inf


def test_bad_device_is_reported(gpu_check, capsys):
    assert gpu_check.main(["--device", "nonsense", "--quick", "--no-timing"]) == 2
    assert "not usable" in capsys.readouterr().out
