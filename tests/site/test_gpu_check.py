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

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "gpu_check.py"


def run(*args, timeout=120):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, timeout=timeout,
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def gpu_check():
    if str(SCRIPT.parent) not in sys.path:                 # its comparison module, gpu_compare
        sys.path.insert(0, str(SCRIPT.parent))
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
    names = [*gpu_check.solver_cases(True), *gpu_check.model_cases(True)]
    rows = dict(re.findall(r"^(\S.*?)\s{2,}(\d\.\de[+-]\d\d\s{2,}\S+\s{2,}.*?)\s{2,}\d+\.\d\d / ",
                           out, flags=re.M))
    assert sorted(rows) == sorted(names)                           # one row per compared function
    for name, cells in rows.items():
        diff, spread, status = cells.split(None, 2)
        assert float(diff) <= 1e-12 and spread == "-" and status == "ok", (name, cells)
    for method in ("gd", "ngd", "polyak", "mirror", "spectral"):   # every method, every parameterization
        for kind in ("W", "KQ", "p"):
            assert f"train ({kind}, {method})" in out
            assert f"train ({kind}, {method}), {gpu_check.SHORT} steps" in out
    assert "ERROR" not in out and "gpu-check: OK" in out
    ratios = re.findall(r"^A\d.*\s(\d+\.\d\d)$", out, flags=re.M)
    assert len(ratios) == 5


@pytest.fixture(scope="module")
def gpu_compare(gpu_check):
    return sys.modules["gpu_compare"]


def test_relative_difference(gpu_compare):
    rd = gpu_compare.relative_difference
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


def test_one_ulp_spread_tells_amplified_rounding_from_a_device_error(gpu_check, gpu_compare, monkeypatch):
    """An output above the tolerance passes only within SPREAD_FACTOR x its own spread under
    one-ulp input moves (per output: one output's spread never covers another), never when the
    spread or the difference is infinite, never for a short run; an error in a rerun flags the row."""
    base = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)

    def case(device_gaps, jitter_gaps, raise_in_rerun=False):
        def run(dev):
            if gpu_compare._JITTER is not None:                # a CPU run with inputs moved by one ulp
                if raise_in_rerun:
                    raise RuntimeError("solver failed on the moved inputs")
                gaps = jitter_gaps
            else:
                gaps = device_gaps if dev == "other" else [0.0] * len(device_gaps)
            return [base * (1 + g) for g in gaps]
        return run

    factor = gpu_check.SPREAD_FACTOR
    cases = {"exact": case([0.0], [0.0]),
             "amplified": case([1e-4, 1e-13], [1e-4, 1e-13]),
             "just inside the factor": case([0.95 * factor * 1e-4], [1e-4]),
             "just outside the factor": case([1.05 * factor * 1e-4], [1e-4]),
             "another output's spread": case([1e-4, 5e-5], [1e-3, 0.0]),
             "no spread": case([1e-3], [0.0]),
             "rerun fails": case([1e-3], [1e-2], raise_in_rerun=True),
             f"amplified{gpu_check.SHORT_SUFFIX}": case([1e-4], [1e-4])}

    def shape_change(dev):
        if gpu_compare._JITTER is not None:
            return [base[:2]]
        return [base * (1 + 1e-3) if dev == "other" else base]

    def nan_on_device(dev):
        return [base * math.nan if dev == "other" else base * (1 + (gpu_compare._JITTER is not None))]

    cases.update({"shape changes in a rerun": shape_change, "NaN on the device": nan_on_device})
    monkeypatch.setattr(gpu_check, "solver_cases", lambda quick: cases)
    monkeypatch.setattr(gpu_check, "model_cases", lambda quick: {})
    monkeypatch.setattr(gpu_check, "_sync", lambda device: None)
    rows, ok = gpu_check.compare("other", True, 1e-6)
    status = {row[0]: row[3] for row in rows}
    assert status["exact"] == "ok" and status["amplified"] == "ok (ill-conditioned)"
    assert status["just inside the factor"] == "ok (ill-conditioned)"
    for name in ("just outside the factor", "another output's spread", "no spread",
                 f"amplified{gpu_check.SHORT_SUFFIX}", "shape changes in a rerun", "NaN on the device"):
        assert status[name] == "ABOVE 1e-06", name
    assert status["rerun fails"].startswith("ERROR in a 1-ulp rerun on cpu: RuntimeError")
    assert not ok and gpu_compare._JITTER is None
    spread = {row[0]: row[2] for row in rows}
    assert spread["exact"] == "-" and spread["amplified"] == "1.0e-04"
    assert spread["another output's spread"] == "1.0e-03"       # the worst output's: the first


def test_one_ulp_jitter_moves_each_input_to_a_neighbouring_float(gpu_check, gpu_compare):
    plain, P0 = gpu_check.gaussian(2000, seed=3), gpu_check.problem("cpu", trials=2)
    gpu_compare._JITTER = torch.Generator().manual_seed(0)
    try:
        moved, P = gpu_check.gaussian(2000, seed=3), gpu_check.problem("cpu", trials=2)
    finally:
        gpu_compare._JITTER = None
    inf = torch.full_like(plain, math.inf)
    up, down = torch.nextafter(plain, inf), torch.nextafter(plain, -inf)
    assert bool(((moved == plain) | (moved == up) | (moved == down)).all())
    assert all(int(n) > 500 for n in ((moved == plain).sum(), (moved == up).sum(), (moved == down).sum()))
    for name in ("X", "Z", "v"):                                   # every real input moves; labels do not
        a, b = getattr(P0, name), getattr(P, name)
        assert not torch.equal(a, b) and torch.allclose(a, b, rtol=3e-16, atol=0), name
    assert torch.equal(P0.Y, P.Y)
