"""The v-SVM and the relaxed p-SVM of joint (v, p) training (paper B)."""

import numpy as np
import pytest
import torch

import attnsvm as A

F64 = torch.float64


def _b3(third):
    """Paper B's joint-training instance (B3): W = I, so the keys are the tokens."""
    X = torch.tensor([[[0.0, 0.0], [1.0, 1.0]], [[0.0, 0.0], [1.0, -1.0]], [[0.0, 0.0], third]],
                     dtype=F64)
    return X, torch.tensor([1.0, -1.0, 1.0], dtype=F64)


def test_v_svm_hand_solved_on_b3():
    """Selected tokens (1,1), (1,-1) with label -1, (0.5,1.5): v = (0, 1), margins 1, 1, 1.5."""
    X, Y = _b3([0.5, 1.5])
    result = A.maxmargin.v_svm(X, Y, [1, 1, 1])
    assert torch.allclose(result.W, torch.tensor([0.0, 1.0], dtype=F64), atol=1e-12)
    assert torch.allclose(result.margins[:, 0], torch.tensor([1.0, 1.0, 1.5], dtype=F64))
    assert result.support[:, 0].tolist() == [True, True, False]


def test_relaxed_p_svm_on_b3_relaxed_and_tight():
    """Relaxed B3: S = {0, 1}; p^T x_i1 >= 1 for i = 0, 1 and >= 0 for i = 2 gives p = (1, 0),
    while the p-SVM (every example at margin 1) needs a longer p. Tight B3 ((0.5, 1)): S = all."""
    X, Y = _b3([0.5, 1.5])
    S = A.maxmargin.v_svm(X, Y, [1, 1, 1]).support[:, 0]
    relaxed = A.maxmargin.relaxed_p_svm(X, [1, 1, 1], S)
    assert torch.allclose(relaxed.W, torch.tensor([1.0, 0.0], dtype=F64), atol=1e-12)
    plain = A.p_svm(X, [1, 1, 1])
    assert plain.objective > relaxed.objective + 0.1
    X, Y = _b3([0.5, 1.0])
    S = A.maxmargin.v_svm(X, Y, [1, 1, 1]).support[:, 0]
    assert bool(S.all())
    assert torch.allclose(A.maxmargin.relaxed_p_svm(X, [1, 1, 1], S).W, A.p_svm(X, [1, 1, 1]).W, atol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_relaxed_p_svm_agrees_with_cvxpy(seed):
    cp = pytest.importorskip("cvxpy")
    g = A.set_seed(100 + seed)
    K = torch.randn(3, 3, 6, generator=g, dtype=F64)      # 6 constraints in R^6: feasible
    alpha = torch.randint(0, 3, (3,), generator=g)
    S = torch.tensor([True, False, True])
    result = A.maxmargin.relaxed_p_svm(K, alpha, S)
    p = cp.Variable(6)
    cons = [(K[i, alpha[i]] - K[i, t]).numpy() @ p >= float(S[i])
            for i in range(3) for t in range(3) if t != alpha[i]]
    cp.Problem(cp.Minimize(cp.sum_squares(p)), cons).solve(solver="CLARABEL")
    assert np.allclose(result.W.numpy(), p.value, atol=1e-6)
    assert result.support.any()


def test_infeasible_and_bad_input():
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]], dtype=F64)
    with pytest.raises(A.InfeasibleError, match="v-SVM is infeasible"):
        A.maxmargin.v_svm(X, torch.tensor([1.0, -1.0], dtype=F64), [0, 0])
    K = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]], dtype=F64)          # duplicated key
    with pytest.raises(A.InfeasibleError, match="relaxed p-SVM is infeasible"):
        A.maxmargin.relaxed_p_svm(K, [0], torch.tensor([True]))
    with pytest.raises(ValueError, match="labels"):
        A.maxmargin.v_svm(X, torch.tensor([1.0, 0.0], dtype=F64), [0, 0])
    with pytest.raises(ValueError, match="must be"):
        A.maxmargin.v_svm(X, torch.ones(3, dtype=F64), [0, 0])
    with pytest.raises(ValueError, match="boolean mask"):
        A.maxmargin.relaxed_p_svm(X, [0, 0], torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="boolean mask"):
        A.maxmargin.relaxed_p_svm(X, [0, 0], torch.tensor([True]))
    with pytest.raises(ValueError, match="NaN or inf"):
        A.maxmargin.v_svm(torch.full_like(X, float("nan")), torch.ones(2, dtype=F64), [0, 0])


def test_badly_scaled_features_give_the_solution_not_inf():
    """A feasible v-SVM whose features span ten orders of magnitude (first 1e-14): the exact
    solution has norm ~7e13; the least-distance solve must return it (r[-1] taken from its
    accurate small root), never inf or NaN, and refuse only beyond float64's reach."""
    R = torch.tensor([[[1.0357e-14, 1.0357e-14]], [[1.16e-4, -1.16e-4]], [[1.5641e-10, 3.1283e-10]]],
                     dtype=F64)
    Y = torch.tensor([1.0, -1.0, 1.0], dtype=F64)
    result = A.maxmargin.v_svm(R, Y, [0, 0, 0])
    assert bool(torch.isfinite(result.W).all()) and abs(float(result.margins.min()) - 1) < 1e-6
    # v = c (1, 1) exactly; the features' 1e10 spread costs ~1e10 * eps of relative accuracy
    assert abs(float(result.W[0] / result.W[1]) - 1) < 1e-5
    with pytest.raises((A.IllConditionedError, A.InfeasibleError)):
        A.maxmargin.v_svm(R * torch.tensor([1e-6, 1.0, 1.0], dtype=F64)[:, None, None], Y, [0, 0, 0])


def test_relaxed_p_svm_with_no_supported_example_is_zero():
    K = torch.randn(2, 3, 4, generator=A.set_seed(7), dtype=F64)
    result = A.maxmargin.relaxed_p_svm(K, [0, 1], torch.tensor([False, False]))
    assert float(result.W.abs().max()) == 0.0
