"""Issue 18: extreme inputs computed or refused clearly, norm_svm's polish, huge starts, devices."""

import math

import numpy as np
import pytest
import torch

import attnsvm as A
from fuzz_inputs import ABSENT_CUDA      # CUDA without a GPU, else one past the last GPU

F64 = torch.float64


def test_norm_svm_matches_hoelder_on_the_smallest_case():
    r = A.norm_svm([[[0.35, 0.82], [0.33, -1.3]]], [[0.91, 0.45]], [0], 3, diagonal=True)
    w = torch.tensor([0.14440102, 1.04546321], dtype=F64)
    assert torch.allclose(r.W.diagonal(), w, rtol=0, atol=1e-8)
    assert r.accuracy == "polished" and r.unique


@pytest.mark.parametrize("p", [1.01, 1.1, 1.5, 1.75, 2.0, 3.0, 7.0, 20.0, 100.0])
@pytest.mark.parametrize("diagonal", [False, True])
def test_every_one_constraint_case_is_hoelder(p, diagonal):
    """One constraint <a, w> >= 1: w_j = sign(a_j) |a_j|^(q-1) / ||a||_q^q (Hoelder's equality)."""
    rng = np.random.default_rng(int(p * 100) + diagonal)
    q = p / (p - 1)
    for d in (1, 2, 3, 4):
        X, Z = rng.normal(size=(1, 2, d)), rng.normal(size=(1, d))
        diff = X[0, 0] - X[0, 1]
        a = diff * Z[0] if diagonal else np.outer(diff, Z[0]).ravel()
        w = np.sign(a) * np.abs(a) ** (q - 1) / (np.abs(a) ** q).sum()
        r = A.norm_svm(X, Z, [0], p, diagonal=diagonal)
        got = (r.W.diagonal() if diagonal else r.W.flatten()).numpy()
        assert np.abs(got - w).max() <= 1e-9 * np.abs(w).max()
        assert r.accuracy == "polished"
        assert abs(r.objective - 1 / (np.abs(a) ** q).sum() ** (1 / q)) <= 1e-12 * r.objective


@pytest.mark.parametrize("norm", [1, "spectral"])
def test_l1_and_spectral_say_their_solution_may_not_be_a_point(norm):
    rng = np.random.default_rng(3)
    X, Z = rng.normal(size=(1, 2, 3)), rng.normal(size=(1, 3))
    a = np.outer(X[0, 0] - X[0, 1], Z[0])
    r = A.norm_svm(X, Z, [0], norm)
    dual = np.abs(a).max() if norm == 1 else np.linalg.svd(a, compute_uv=False).sum()
    assert not r.unique and r.accuracy == "solver"
    assert abs(r.objective - 1 / dual) <= 1e-7 / dual and r.min_margin >= 1 - 1e-6


def test_polish_certifies_multi_constraint_problems():
    P = A.random_problem(3, 4, 4, generator=A.set_seed(0))
    for p in (1.1, 1.5, 3.0, 10.0):
        for diagonal in (False, True):
            r = A.norm_svm(P.X, P.Z, P.opt, p, diagonal=diagonal)
            assert r.accuracy == "polished" and abs(r.min_margin - 1) <= 1e-12


@pytest.mark.parametrize("p", [1e6, 1 + 1e-6, 1000.0, 0.5])
def test_norm_svm_refuses_exponents_outside_its_range(p):
    P = A.random_problem(2, 3, 4, generator=A.set_seed(1))
    with pytest.raises(ValueError, match="norm"):
        A.norm_svm(P.X, P.Z, P.opt, p)


@pytest.mark.parametrize("tol", [-1.0, math.nan, "x"])
def test_norm_svm_checks_support_tol(tol):
    P = A.random_problem(2, 3, 4, generator=A.set_seed(1))
    with pytest.raises((ValueError, TypeError), match="support_tol"):
        A.norm_svm(P.X, P.Z, P.opt, 3, support_tol=tol)


@pytest.mark.parametrize("scale", [1e200, 1e-300])
def test_scale_invariant_solvers_solve_rescaled_data(scale):
    P = A.random_problem(2, 3, 4, generator=A.set_seed(0))
    S = torch.zeros(2, 3, dtype=torch.bool)
    S[torch.arange(2), P.opt] = True
    assert torch.allclose(A.gen_svm(P.X * scale, P.Z, S).W * scale, A.gen_svm(P.X, P.Z, S).W, rtol=1e-12)
    r = A.norm_svm(P.X * scale, P.Z, P.opt, 3)
    assert abs(r.objective * scale / A.norm_svm(P.X, P.Z, P.opt, 3).objective - 1) < 1e-12
    assert float(A.maxmargin.matrix_norm(torch.ones(2, 2, dtype=F64) * scale, 2)) == pytest.approx(2 * scale, rel=1e-15)
    assert float(A.maxmargin.matrix_norm(torch.ones(2, 2, dtype=F64) * scale, "spectral")) == pytest.approx(2 * scale, rel=1e-15)


def test_extreme_values_elsewhere():
    C, prediction = A.maxmargin.svm_eq_fit(torch.ones(2, 2, dtype=F64) * 3e300, torch.zeros(2, 2), torch.ones(2, 2, dtype=F64) * 1e300)
    assert C == pytest.approx(3.0) and bool(torch.isfinite(prediction).all())
    assert A.book.proportion_interval(3e299, 1e300) == pytest.approx((0.3, 0.3))
    P = A.random_problem(2, 3, 4, generator=A.set_seed(0))
    with pytest.raises(ValueError, match="range"):
        A.maxmargin.kkt_multipliers(P.X * 1e200, P.Z, P.opt, A.att_svm(P.X * 1e200, P.Z, P.opt))
    with pytest.raises(ValueError, match="2\\*\\*32"):
        A.set_seed(2 ** 64)
    X, Y, Z, V, W0 = A.studies.a6_draw(2, 3, generator=A.set_seed(0))
    with pytest.raises(ValueError, match="overflow"):
        A.studies.ngd_relu_head(X * 1e300, Y, Z, V, W0, steps=3)
    mixed = A.studies.ngd_relu_head(X.float(), Y, Z, V, W0, steps=3, every=1)
    assert mixed.dtype == F64 and bool(torch.isfinite(mixed).all())


def test_bad_arguments_of_newer_entry_points():
    P = A.random_problem(2, 3, 4, generator=A.set_seed(0))
    B = A.random_problem(2, 3, 4, trials=2, generator=A.set_seed(0))
    with pytest.raises(TypeError, match="ok must be True or False"):
        A.book.claim("k", 1.0, "no")
    with pytest.raises(TypeError, match="stable"):
        A.predict(A.WAttention.zeros(4), P, stable="no")
    with pytest.raises(TypeError, match="dtype"):
        A.studies.a6_draw(2, 3, dtype=None)
    with pytest.raises(ValueError, match="trials"):
        A.empirical_risk(A.WAttention.zeros(4), B, A.model.PenalizedHead(torch.ones(3, 4), 0.1))
    probs = torch.full((2, 2, 3), 1 / 3, dtype=F64)
    with pytest.raises(ValueError, match="softmax"):
        A.maxmargin.run_outcomes(B, probs * 3)
    with pytest.raises(ValueError, match="norm"):
        A.maxmargin.run_outcomes(B, probs, norm="l2")
    with pytest.raises(TypeError, match="mask"):
        A.att_svm(P.X, P.Z, P.opt, mask="m")
    with pytest.raises(ValueError, match="beta"):
        A.studies.span_iterates(torch.ones(3, 5), torch.ones(3, 2, 2, 2), torch.ones(3, 2, 2), torch.ones(3, 2, 2))


@pytest.mark.parametrize("method", ["gd", "ngd", "polyak", "mirror", "spectral"])
def test_a_shared_W_on_a_batched_problem_is_refused(method):
    """One W for the trials of a batched problem would descend the sum of their risks (GD on 2
    copies = GD with twice the step): train refuses it and says to give W the trials."""
    B = A.random_problem(2, 3, 4, trials=2, generator=A.set_seed(0))
    with pytest.raises(ValueError, match="one set of parameters per trial"):
        A.train(A.WAttention.zeros(4), B, 3, method=method)
    history = A.train(A.WAttention.zeros(4, trials=2), B, 3, method=method,
                      max_step=1.0 if method == "polyak" else None)
    assert history.loss.shape == (4, 2) and history.norm.shape == (4, 2)
    assert bool(torch.isfinite(history.loss).all())


@pytest.mark.parametrize("scale", [1e200, 1e300])
@pytest.mark.parametrize("method", ["gd", "ngd", "polyak", "mirror", "spectral"])
@pytest.mark.parametrize("kind", ["W", "KQ"])
def test_train_from_a_huge_start_is_finite_or_refused(scale, method, kind):
    P = A.random_problem(2, 3, 4, generator=A.set_seed(0))
    g = A.set_seed(1)
    if kind == "W":
        att = A.WAttention(torch.randn(4, 4, generator=g, dtype=F64) * scale)
    else:
        att = A.KQAttention(torch.randn(4, 4, generator=g, dtype=F64) * scale,
                            torch.randn(4, 4, generator=g, dtype=F64) * scale)
    try:
        h = A.train(att, P, 5, method=method, p=3.0, max_step=1.0 if method == "polyak" else None)
    except ValueError as error:
        assert "overflow" in str(error)
        return
    for row in (h.loss, h.norm, h.max_prob, *att.params):
        assert bool(torch.isfinite(row).all())
    assert float(h.norm[0]) == pytest.approx(float(A.maxmargin.matrix_norm(att.combined(), 2)) if method == "gd" else
                                             float(h.norm[0]), rel=1e-12)


def test_history_norm_does_not_overflow():
    P = A.random_problem(2, 3, 4, generator=A.set_seed(0))
    W = torch.randn(4, 4, generator=A.set_seed(2), dtype=F64) * 1e200
    h = A.train(A.WAttention(W), P, 2)
    assert float(h.norm[0]) == pytest.approx(float(A.maxmargin.matrix_norm(W, 2)), rel=1e-14)


@pytest.mark.parametrize("device", [ABSENT_CUDA, "cuda:99", torch.device(ABSENT_CUDA)])
def test_unavailable_devices_are_refused_by_the_library(device):
    P = A.random_problem(2, 3, 4, generator=A.set_seed(0))
    calls = [lambda: A.random_problem(2, 3, 4, device=device), lambda: P.to(device),
             lambda: A.WAttention.zeros(4, device=device), lambda: A.KQAttention.init(4, device=device),
             lambda: A.model.DiagonalAttention.init(4, device=device), lambda: A.get_device(device)]
    for call in calls:
        with pytest.raises(ValueError) as error:
            call()
        message = str(error.value)
        assert "cuda" in message and "cpu" in message and "device='auto'" in message
    if not torch.cuda.is_available():
        assert A.get_device("auto") == torch.device("cpu")
