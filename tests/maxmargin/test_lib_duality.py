"""Constraint features F_it and the KKT multipliers of Att-SVM (W_mm = sum lambda_it F_it)."""

import pytest
import torch

import attnsvm as A


def test_features_give_the_margins_by_hand():
    P = A.random_problem(3, 4, 5, generator=A.set_seed(21))
    F = A.maxmargin.constraint_features(P.X, P.Z, P.opt)
    assert F.shape == (3, 4, 5, 5) and F.dtype == torch.float64
    i, t = 1, int(P.opt[1] + 1) % 4
    assert torch.allclose(F[i, t], torch.outer(P.X[i, P.opt[i]] - P.X[i, t], P.Z[i]))
    assert float(F[torch.arange(3), P.opt].abs().max()) == 0.0          # no feature for alpha_i
    svm = A.att_svm(P.X, P.Z, P.opt)
    margins = torch.einsum("ntde,de->nt", F, svm.W)
    finite = torch.isfinite(svm.margins)
    assert torch.allclose(margins[finite], svm.margins[finite], atol=1e-9)


def test_multipliers_rebuild_w_and_vanish_off_the_support():
    P = A.random_problem(4, 5, 3, generator=A.set_seed(22))
    svm = A.att_svm(P.X, P.Z, P.opt)
    lam, residual = A.maxmargin.kkt_multipliers(P.X, P.Z, P.opt, svm)
    assert residual < 1e-9
    assert bool((lam >= 0).all()) and float(lam[~svm.support].abs().max()) == 0.0
    F = A.maxmargin.constraint_features(P.X, P.Z, P.opt)
    assert torch.allclose(torch.einsum("nt,ntde->de", lam, F), svm.W, atol=1e-9)
    # complementary slackness and strong duality: ||W||^2 = <W, sum lambda F> = sum lambda
    assert float(lam.sum()) == pytest.approx(float(svm.W.norm()) ** 2, rel=1e-8)


def test_a_result_of_another_problem_shows_a_large_residual():
    P = A.random_problem(3, 4, 4, generator=A.set_seed(23))
    Q = A.random_problem(3, 4, 4, generator=A.set_seed(24))
    wrong = A.att_svm(Q.X, Q.Z, Q.opt)
    _, residual = A.maxmargin.kkt_multipliers(P.X, P.Z, P.opt, wrong)
    assert residual > 1e-3


def test_bad_input_is_refused():
    P = A.random_problem(2, 3, 4, generator=A.set_seed(25))
    nuc = A.att_svm(P.X, P.Z, P.opt, "nuc")
    with pytest.raises(ValueError, match="Frobenius"):
        A.maxmargin.kkt_multipliers(P.X, P.Z, P.opt, nuc)
    with pytest.raises(ValueError, match="alpha"):
        A.maxmargin.constraint_features(P.X, P.Z, torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="Z"):
        A.maxmargin.constraint_features(P.X, P.Z[:1], P.opt)
    R = A.random_problem(3, 3, 4, generator=A.set_seed(26))              # three examples, not two
    other = A.att_svm(R.X, R.Z, R.opt)
    with pytest.raises(ValueError, match="support of shape"):
        A.maxmargin.kkt_multipliers(P.X, P.Z, P.opt, other)
