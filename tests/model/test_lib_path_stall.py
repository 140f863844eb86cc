"""The regularization path cannot stall (attnsvm.model._path_descent): the instance on which it did, and
the same computation under every BLAS kernel NumPy can pick.

Chapter 2 starts a fresh path from each candidate SVM direction of paper A's A2 instance at every
radius from 10 ||W^mm|| on. With the candidate directions computed under OpenBLAS's SkylakeX or
Prescott kernels, the start from the locally optimal selection (1, 2) at R = 16.48 entered a
4-cycle of accepted non-monotone steps, none better than the best point, and ended with residual
0.84 whatever the step budget (20 to 10,000 steps); under Haswell/Zen it converged. The directions
below are the SkylakeX ones, bit for bit, so that the first test reproduces the instance on any
machine; the second recomputes everything under each kernel in a fresh process.
"""

import json
import os
import subprocess
import sys

import pytest
import torch

import attnsvm as A

F64 = torch.float64
# chapter 2's grid of normalized radii, and the one at which the (1, 2) start stalled
S_GRID = torch.logspace(-1.5, 2.3, 49, dtype=F64)
STALLED = 32                                       # S_GRID[32] = 10.80, R = 16.48 on A2
# candidate directions of A2 (global (0, 0), locally optimal (0, 2), (1, 0), (1, 2)) and
# ||W^mm(opt)||_F, as computed under OPENBLAS_CORETYPE=SkylakeX (float.hex)
A2_DIRECTIONS = [
    "0x1.09da3c2a9a755p-1", "-0x1.6c71e6bdd94a6p-1", "-0x1.a8af0f3c070eep-2", "-0x1.d1be20b66e1f4p-3",
    "-0x1.b2bb88b33428cp-2", "-0x1.fb19574c63f9fp-2", "0x1.7bd8fba45d44ep-1", "-0x1.3e1a7dc2eaafep-3",
    "0x1.1d938b419ec1dp-1", "-0x1.fd9ddb417677fp-3", "0x1.73034079345acp-5", "0x1.94bf6405010a6p-1",
    "-0x1.eeb786d4f26acp-4", "-0x1.3c295dd679439p-5", "0x1.e3c526d6e09a7p-1", "0x1.352a6fc4748afp-2"]
A2_OBJECTIVE = "0x1.86bf88d2679cdp+0"


def test_the_start_that_stalled_converges():
    """The (1, 2) start at R = 16.48 with the SkylakeX directions: certified (residual <= 1e-4,
    no worse than the scaled reference), like the other three candidates, in fewer steps than the
    default budget allows."""
    problem = A.figure_problem("A2", generator=A.set_seed(3))
    D = torch.tensor([float.fromhex(x) for x in A2_DIRECTIONS], dtype=F64).reshape(4, 2, 2)
    R = float(float.fromhex(A2_OBJECTIVE) * S_GRID[STALLED])
    assert abs(R - 16.48) < 5e-3
    for steps in (200, 1000):
        path = A.regularization_path(A.WAttention(R * D), A.Problem.stack([problem] * 4), [R],
                                     reference=D, steps=steps)
        assert path.all_converged, (steps, path.tangential)


SCRIPT = r"""
import json, warnings
import threadpoolctl, torch
import attnsvm as A
from attnsvm.studies.path_study import candidate_directions
torch.set_default_dtype(torch.float64)
S_GRID = torch.logspace(-1.5, 2.3, 49)
instances = {"A1": A.figure_problem("A1", generator=A.set_seed(1)),
             "A2": A.figure_problem("A2", generator=A.set_seed(3)),
             "random": A.random_problem(4, 5, 6, generator=A.set_seed(0))}
failed = []
for name, P in instances.items():
    kinds = A.maxmargin.classify_selections(P)
    _, _, D = candidate_directions(kinds)
    objective = float(kinds[tuple(P.opt.tolist())][1].objective)
    for R in (objective * S_GRID[S_GRID >= 10]).tolist():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", A.PathWarning)
            path = A.regularization_path(A.WAttention(R * D), A.Problem.stack([P] * len(D)), [R],
                                         reference=D)
        if not path.all_converged:
            failed.append([name, R, path.tangential[-1].tolist()])
kernel = [i.get("architecture") for i in threadpoolctl.threadpool_info()
          if i["internal_api"] == "openblas"]
print(json.dumps({"kernel": kernel, "failed": failed}))
"""

# the kernel each OPENBLAS_CORETYPE selects in NumPy's bundled OpenBLAS (Zen runs Haswell's)
KERNELS = {"Haswell": "Haswell", "SkylakeX": "SkylakeX", "Zen": "Haswell", "Prescott": "Katmai"}


@pytest.fixture(scope="module")
def fresh_paths_per_kernel():
    """Chapter 2's fresh candidate paths (A1, A2, the random instance; every radius from
    10 ||W^mm|| on) computed from scratch under each kernel, the processes run side by side."""
    runs = {}
    for coretype in KERNELS:
        env = dict(os.environ, OPENBLAS_CORETYPE=coretype, OMP_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1")
        runs[coretype] = subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = {}
    for coretype, run in runs.items():
        stdout, stderr = run.communicate(timeout=600)
        assert run.returncode == 0, stderr
        out[coretype] = json.loads(stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("coretype", list(KERNELS))
def test_every_fresh_candidate_path_converges_under_each_blas_kernel(fresh_paths_per_kernel,
                                                                    coretype):
    """Under each kernel (checked to have taken effect) every fresh start converges at every radius."""
    run = fresh_paths_per_kernel[coretype]
    assert run["failed"] == []
    if set(run["kernel"]) != {KERNELS[coretype]}:          # NumPy's and SciPy's OpenBLAS
        pytest.skip(f"OPENBLAS_CORETYPE={coretype} runs {run['kernel']} on this CPU, not "
                    f"{KERNELS[coretype]}: the paths converged, but not under that kernel")


def test_a_reset_window_holds_only_the_best_point():
    """``_Recent.reset``: where masked, the window's worst is the reset score at once, and after
    further pushes the worst of the entries pushed since (and the reset score); elsewhere the
    window is untouched. Checked against the maximum over the window, computed directly."""
    from attnsvm.model.gradients import Evaluation
    from attnsvm.model._path_descent import MEMORY, _Recent

    def score(values):
        risk = torch.tensor(values, dtype=F64)
        return Evaluation(risk, torch.empty(0), [], torch.zeros(2, 1, dtype=torch.long), risk)

    g = torch.Generator().manual_seed(0)
    pushed = [torch.rand(2, generator=g, dtype=F64).tolist() for _ in range(2 * MEMORY + 3)]
    recent, window = _Recent(score(pushed[0])), [pushed[0]] * MEMORY
    for k, values in enumerate(pushed[1:], start=1):
        recent.push(score(values))
        window = (window + [values])[-MEMORY:]
        if k == MEMORY + 4:                                   # reset trial 0 to a new best point
            recent.reset(torch.tensor([True, False]), score([0.01, 0.99]))
            window = [[0.01, w[1]] for w in window]
        worst = [max(w[j] for w in window) for j in range(2)]
        for j in range(2):
            below, above = list(worst), list(worst)
            below[j], above[j] = worst[j] * (1 - 1e-9), worst[j] * (1 + 1e-9)
            assert bool(recent.no_worse_than_worst(score(below))[j])
            assert not bool(recent.no_worse_than_worst(score(above))[j])
