"""attnsvm.studies.linear_bias: the lp max-margin classifier and the steepest / mirror descents of the
linear precursors (chapter 9), checked against independent computations."""

import math

import numpy as np
import pytest
import scipy.optimize
import torch

import attnsvm as A

F64 = torch.float64


def _holder(a: torch.Tensor, p: float) -> torch.Tensor:
    """The lp solution of the single constraint <a, w> >= 1 (Hoelder): sign(a)|a|^(q-1)/||a||_q^q."""
    if p == math.inf:
        return torch.sign(a) / a.abs().sum()
    q = p / (p - 1)
    return torch.sign(a) * a.abs() ** (q - 1) / (a.abs() ** q).sum()


@pytest.mark.parametrize("p", [1.5, 2.0, 3.0, math.inf])
def test_one_point_is_the_holder_solution(p):
    x = torch.tensor([[0.3, -2.0, 1.1, 0.7]], dtype=F64)
    for y in (1.0, -1.0):
        res = A.studies.linear_max_margin(x, torch.tensor([y]), p)
        assert torch.allclose(res.w, _holder(y * x[0], p), atol=1e-7)
        assert abs(res.margin - 1) < 1e-7
        assert res.unique == (p != math.inf)


@pytest.mark.parametrize("p", [1.5, 3.0])
def test_several_points_match_a_general_purpose_solver(p):
    X, y = A.studies.separable_data(6, 4, generator=A.set_seed(3))
    X, y = X[0], y[0]
    res = A.studies.linear_max_margin(X, y, p)
    feats = (y[:, None] * X).numpy()
    ref = scipy.optimize.minimize(lambda w: np.sum(np.abs(w) ** p) / p, res.w.numpy() * 1.3,
                                  constraints=[{"type": "ineq", "fun": lambda w: feats @ w - 1}],
                                  method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
    assert ref.success
    assert abs(res.objective - np.sum(np.abs(ref.x) ** p) ** (1 / p)) < 1e-6 * res.objective
    assert float(A.corr(res.w, torch.from_numpy(ref.x))) > 1 - 1e-8


def test_max_margin_is_the_largest_normalized_margin():
    X, y = A.studies.separable_data(10, 5, generator=A.set_seed(4))
    X, y = X[0], y[0]
    for p in (1.5, 2, 3):
        res = A.studies.linear_max_margin(X, y, p)
        best = float(A.studies.linear_margin(res.w, X, y, p))
        assert abs(best - 1 / res.objective) < 1e-8
        others = A.studies.linear_margin(torch.randn(200, 5, dtype=F64, generator=A.set_seed(5)), X, y, p)
        assert float(others.max()) < best


def test_small_margin_data_are_still_verified():
    # two nearly opposite points with the same label: separable, but only barely
    X = torch.tensor([[1.0, 1e-4], [-1.0, 1e-4]], dtype=F64)
    res = A.studies.linear_max_margin(X, torch.ones(2, dtype=F64), 2)
    assert torch.allclose(res.w, torch.tensor([0.0, 1e4], dtype=F64), rtol=1e-5)
    assert res.margin >= 1 - 1e-6


def test_not_separable_raises_infeasible():
    X = torch.tensor([[1.0, 0.0], [2.0, 0.0]], dtype=F64)
    with pytest.raises(A.InfeasibleError, match="not linearly separable"):
        A.studies.linear_max_margin(X, torch.tensor([1.0, -1.0]), 2)


def test_normalized_l2_steepest_and_mirror_are_ngd():
    X, y = A.studies.separable_data(5, 3, generator=A.set_seed(6))
    w = torch.zeros(3, dtype=F64)
    feats = y[0, :, None] * X[0]
    for _ in range(30):
        g = -(torch.exp(-(feats @ w))[:, None] * feats).mean(0)
        w = w - 0.2 * g / g.norm()
    for method in ("steepest", "mirror"):
        run = A.studies.linear_descent(X, y, method, 2, 30, 0.2)
        assert torch.allclose(run.w[0], w, atol=1e-12)


def test_unnormalized_steps_follow_the_theorems_updates():
    X, y = A.studies.separable_data(5, 3, generator=A.set_seed(7))
    feats = y[0, :, None] * X[0]
    grad = lambda w: -(torch.exp(-(feats @ w))[:, None] * feats).mean(0)          # noqa: E731
    w_sign, u, w_md = torch.zeros(3, dtype=F64), torch.zeros(3, dtype=F64), torch.zeros(3, dtype=F64)
    for _ in range(20):
        g = grad(w_sign)
        w_sign = w_sign - 0.3 * g.abs().sum() * torch.sign(g)          # ||g||_1 sign(g): l-inf steepest
        u = u - 0.3 * grad(w_md)                                       # p-GD, p = 3
        w_md = torch.sign(u) * u.abs() ** 0.5
    run = A.studies.linear_descent(X[0], y[0], "steepest", math.inf, 20, 0.3, normalized=False)
    assert torch.allclose(run.w, w_sign, atol=1e-12)
    run = A.studies.linear_descent(X[0], y[0], "mirror", 3, 20, 0.3, normalized=False)
    assert torch.allclose(run.w, w_md, atol=1e-12)
    assert run.iterates.shape == (21, 3)


@pytest.mark.parametrize("method, p", [("steepest", 3.0), ("mirror", 1.5), ("steepest", 1.5)])
def test_descent_ends_nearest_its_own_max_margin(method, p):
    X, y = A.studies.separable_data(6, 20, trials=3, generator=A.set_seed(8))
    run = A.studies.linear_descent(X, y, method, p, 1500, 0.1, log_every=500)
    for b in range(3):
        corr = {q: float(A.corr(run.w[b], A.studies.linear_max_margin(X[b], y[b], q).w)) for q in (1.5, 2, 3)}
        assert max(corr, key=corr.get) == p and corr[p] > 0.999


def test_logistic_loss_and_logging():
    X, y = A.studies.separable_data(5, 4, trials=2, generator=A.set_seed(9))
    run = A.studies.linear_descent(X, y, "steepest", 2, 10, 0.1, loss="logistic", log_every=4)
    assert run.steps.tolist() == [0, 4, 8, 10] and run.iterates.shape == (4, 2, 4)
    assert torch.equal(run.iterates[0], torch.zeros(2, 4, dtype=F64))


def test_normalized_steps_do_not_underflow():
    X, y = A.studies.separable_data(4, 3, generator=A.set_seed(10))
    run = A.studies.linear_descent(X * 100, y, "steepest", 2, 400, 5.0)
    margins = (y[..., None] * X * 100 * run.w[:, None]).sum(-1)
    assert float(margins.min()) > 2000                      # exp(-margin) underflows to 0 here
    assert bool(torch.isfinite(run.w).all())
    assert float((run.iterates[-1] - run.iterates[-2]).norm()) > 4.9     # and the steps go on


def test_separable_data_is_seeded_and_separable():
    X, y = A.studies.separable_data(7, 3, trials=4, margin=0.2, generator=A.set_seed(11))
    X2, y2 = A.studies.separable_data(7, 3, trials=4, margin=0.2, generator=A.set_seed(11))
    assert torch.equal(X, X2) and torch.equal(y, y2)
    assert X.shape == (4, 7, 3) and set(y.unique().tolist()) <= {-1.0, 1.0}
    for b in range(4):
        A.studies.linear_max_margin(X[b], y[b], 2)
