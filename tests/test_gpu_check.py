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


def test_cpu_self_test_prints_the_tables_with_zero_differences(gpu_check):
    done = run("--device", "cpu", "--quick")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for name in ("att_svm (nuc)", "norm_svm (spectral)", "ngd_relu_head", "train (W, ngd)",
                 "train (KQ, polyak)", "train (p, mirror)", "train (KQ, spectral)",
                 "regularization_path (KQ)", "regularization_path (W, reference, restarts=2)",
                 "A3 training, W", "A4 grid", "A6 closed form", "A5 Att-SVM solves"):
        assert name in out, name
    rows = re.findall(r"^(\S.*?)\s{2,}(\d\.\de[+-]\d\d)\s{2,}(\S+)\s{2,}(\S+)", out, flags=re.M)
    assert len(rows) >= 55                                         # one per compared function
    assert all(float(diff) <= 1e-12 and spread == "-" and status == "ok"
               for _, diff, spread, status in rows), rows
    for method in ("gd", "ngd", "polyak", "mirror", "spectral"):   # every method, every parameterization
        for kind in ("W", "KQ", "p"):
            assert f"train ({kind}, {method})" in out
            assert f"train ({kind}, {method}), {gpu_check.SHORT} steps" in out
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


def test_one_ulp_spread_tells_amplified_rounding_from_a_device_error(gpu_check, monkeypatch):
    """A difference above the tolerance passes only within SPREAD_FACTOR x the CPU's own spread
    under one-ulp input moves; a function that does not move under them is flagged."""
    base = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)

    def case(device_gap, jitter_gap):
        def run(dev):
            if gpu_check._JITTER is not None:                # a CPU run with inputs moved by one ulp
                return base * (1 + jitter_gap)
            return base * (1 + device_gap) if dev == "other" else base
        return run

    cases = {"exact": case(0.0, 0.0), "amplified": case(1e-4, 1e-4),
             "bug behind a spread": case(1e-3, 1e-4), "bug": case(1e-3, 0.0)}
    monkeypatch.setattr(gpu_check, "solver_cases", lambda quick: cases)
    monkeypatch.setattr(gpu_check, "model_cases", lambda quick: {})
    monkeypatch.setattr(gpu_check, "_sync", lambda device: None)
    rows, ok = gpu_check.compare("other", True, 1e-6)
    status = {row[0]: row[3] for row in rows}
    assert status == {"exact": "ok", "amplified": "ok (ill-conditioned)",
                      "bug behind a spread": "ABOVE 1e-06", "bug": "ABOVE 1e-06"}
    assert not ok and gpu_check._JITTER is None
    assert [row[2] for row in rows] == ["-", "1.0e-04", "1.0e-04", "0.0e+00"]


def test_one_ulp_jitter_moves_the_inputs_by_one_ulp_at_most(gpu_check):
    plain = gpu_check.gaussian(50, seed=3)
    gpu_check._JITTER = torch.Generator().manual_seed(0)
    try:
        moved, P = gpu_check.gaussian(50, seed=3), gpu_check.problem("cpu", trials=2)
    finally:
        gpu_check._JITTER = None
    ulps = ((moved - plain).abs() / (plain.abs() * torch.finfo(torch.float64).eps)).round()
    assert ulps.max() <= 1 and (ulps == 1).any() and (ulps == 0).any()
    Q = gpu_check.problem("cpu", trials=2)
    assert not torch.equal(P.X, Q.X) and torch.allclose(P.X, Q.X, rtol=3e-16, atol=0)
    assert torch.equal(P.Y, Q.Y)
