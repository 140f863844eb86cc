"""probe_solution_set: the optimal set of a non-strictly-convex Att-SVM, probed along a direction."""

import numpy as np
import pytest
import torch

import attnsvm as A
from attnsvm.maxmargin import solution_set

F64 = torch.float64


def one_constraint(d=3):
    """One example, two tokens: the single constraint a^T W z >= 1, a = x_0 - x_1."""
    X = torch.tensor([[[1.0, 0.5, 0.0][:d], [0.0, -0.5, 0.0][:d]]], dtype=F64)
    Z = torch.tensor([[0.6, 0.0, 0.8][:d]], dtype=F64)
    return X, Z, torch.tensor([0])


def test_spectral_set_of_one_constraint_is_not_a_point():
    # optimum 1 / (|a| |z|); any W = a z^T/(|a|^2 |z|^2) + M with M on the complements and
    # ||M|| <= optimum is optimal: probing along such an M finds both +M and -M
    X, Z, alpha = one_constraint()
    a, z = X[0, 0] - X[0, 1], Z[0]
    optimum = 1 / (a.norm() * z.norm())
    u, v = torch.tensor([0.0, 0.0, 1.0], dtype=F64), torch.tensor([0.0, 1.0, 0.0], dtype=F64)
    probe = A.maxmargin.probe_solution_set(X, Z, alpha, "spectral", torch.outer(u, v))
    assert probe.optimum == pytest.approx(float(optimum), rel=1e-6)
    for W in (probe.highest, probe.lowest, probe.nearest):
        assert float(a @ W @ z) >= 1 - 1e-6
        assert float(torch.linalg.matrix_norm(W, 2)) <= float(optimum) * (1 + 2 * probe.eps)
    top = float(u @ probe.highest @ v)
    assert top == pytest.approx(float(optimum), rel=1e-3)          # the largest M allowed
    assert float(u @ probe.lowest @ v) == pytest.approx(-top, rel=1e-3)
    assert probe.spread < 0.5
    assert probe.attempts[-1][2] == "verified"


def test_strictly_convex_norm_gives_a_point():
    P = A.random_problem(2, 3, 4, generator=A.set_seed(1))
    D = torch.randn(4, 4, dtype=F64, generator=torch.Generator().manual_seed(0))
    probe = A.maxmargin.probe_solution_set(P.X, P.Z, P.opt, 2, D)
    assert probe.spread > 1 - 1e-3              # eps = 1e-6 widens a point by ~sqrt(eps)
    assert float(A.corr(probe.highest, A.att_svm(P.X, P.Z, P.opt).W)) > 1 - 1e-3


def test_failed_attempts_fall_back_and_are_recorded(monkeypatch):
    X, Z, alpha = one_constraint()
    real = solution_set._solve_three
    calls = []

    def flaky(features, direction, d, norm, bound, solver):
        calls.append(solver)
        if len(calls) <= 2:                     # both solvers fail at the first tolerance
            return None, "solver error (simulated)"
        return real(features, direction, d, norm, bound, solver)

    monkeypatch.setattr(solution_set, "_solve_three", flaky)
    probe = A.maxmargin.probe_solution_set(X, Z, alpha, "spectral", torch.eye(3, dtype=F64))
    assert probe.eps == solution_set.EPS_LADDER[1] and probe.solver == "CLARABEL"
    assert [a[2] for a in probe.attempts] == ["solver error (simulated)"] * 2 + ["verified"]


def test_no_verified_answer_raises_a_named_error(monkeypatch):
    X, Z, alpha = one_constraint()
    monkeypatch.setattr(solution_set, "_solve_three", lambda *args: (None, "status infeasible"))
    with pytest.raises(A.IllConditionedError, match="no verified probe.*n=1, T=2, d=3"):
        A.maxmargin.probe_solution_set(X, Z, alpha, "spectral", torch.eye(3, dtype=F64))


def test_an_unverified_answer_is_not_returned(monkeypatch):
    X, Z, alpha = one_constraint()
    monkeypatch.setattr(solution_set, "_solve_three",
                        lambda *args: ([np.zeros((3, 3))] * 3, "solved"))   # violates the margins
    with pytest.raises(A.IllConditionedError, match="answer not verified"):
        A.maxmargin.probe_solution_set(X, Z, alpha, "spectral", torch.eye(3, dtype=F64))


def test_same_answer_on_rescaled_data():
    X, Z, alpha = one_constraint()
    D = torch.eye(3, dtype=F64)
    base = A.maxmargin.probe_solution_set(X, Z, alpha, "spectral", D)
    big = A.maxmargin.probe_solution_set(X * 2.0 ** 40, Z, alpha, "spectral", D)
    assert big.optimum * 2.0 ** 40 == pytest.approx(base.optimum, rel=1e-9)
    assert float(A.corr(big.highest, base.highest)) > 1 - 1e-9


@pytest.mark.parametrize("direction, match", [
    (torch.zeros(3, 3, dtype=F64), "zero matrix"),
    (torch.ones(2, 2, dtype=F64), "direction must be a"),
    (torch.full((3, 3), float("nan"), dtype=F64), "direction"),
    ("abc", "direction"),
])
def test_bad_direction_is_refused(direction, match):
    X, Z, alpha = one_constraint()
    with pytest.raises((ValueError, TypeError), match=match):
        A.maxmargin.probe_solution_set(X, Z, alpha, "spectral", direction)


def test_infeasible_instance_raises_infeasible():
    X = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]], dtype=F64)       # two equal tokens
    Z = torch.tensor([[1.0, 0.0]], dtype=F64)
    with pytest.raises(A.InfeasibleError):
        A.maxmargin.probe_solution_set(X, Z, [0], "spectral", torch.eye(2, dtype=F64))
