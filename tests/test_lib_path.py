"""The regularization path (attnsvm.path): Theorems 1 and 2 on the A1 geometry, the cone-restricted
(local) path, the ball constraint, and bad input."""

import pytest
import torch

import attnsvm as A

F64 = torch.float64
RADII = torch.logspace(0, 3, 7, dtype=F64)          # 1 ... 1e3


@pytest.fixture(scope="module")
def a1():
    problem = A.figure_problem("A1", generator=A.set_seed(1))
    fro = A.att_svm(problem.X, problem.Z, problem.opt, norm="fro")
    nuc = A.att_svm(problem.X, problem.Z, problem.opt, norm="nuc")
    return problem, fro, nuc


def test_w_path_converges_to_frobenius_svm(a1):
    """Theorem 1: W_R / R -> W_mm / ||W_mm||_F; corr >= 0.999 at R = 1e3, increasing along the way."""
    problem, fro, nuc = a1
    att = A.WAttention(0.1 * torch.randn(2, 2, generator=A.set_seed(2), dtype=F64))
    path = A.regularization_path(att, problem, RADII, steps=100)
    assert path.iterates.shape == (7, 2, 2) and torch.equal(path.radii, RADII)
    c = A.corr(path.iterates, fro.W, 1)
    assert float(c[-1]) >= 0.999
    assert (c[3:].diff() > 0).all()
    assert float(A.corr(path.iterates[-1], nuc.W)) < float(c[-1]) - 1e-3    # the other SVM is not it
    # the ball constraint binds: ||W_R|| = R, and the loss decreases with R
    assert torch.allclose(path.iterates.flatten(1).norm(dim=-1), RADII, rtol=1e-9)
    assert (path.loss.diff() <= 1e-12).all()
    assert torch.equal(att.combined(), path.iterates[-1])       # the attention is updated in place
    # the loss reported is the loss of the iterate
    final = A.empirical_risk(A.WAttention(path.iterates[-1]), problem).detach()
    assert torch.allclose(path.loss[-1], final)


def test_kq_path_converges_to_nuclear_svm(a1):
    """Theorem 2: K_R Q_R^T / R -> the nuclear-norm Att-SVM solution (rank 1 on A1)."""
    problem, fro, nuc = a1
    kq = A.KQAttention.init(2, generator=A.set_seed(1))
    path = A.regularization_path(kq, problem, RADII, steps=100)
    assert float(A.corr(path.iterates[-1], nuc.W)) >= 0.999
    assert float(A.corr(path.iterates[-1], fro.W)) < 0.999
    # ||K||^2 + ||Q||^2 <= 2R bounds ||K Q^T||_* <= R
    assert (torch.linalg.matrix_norm(path.iterates, "nuc") <= RADII * (1 + 1e-9)).all()
    assert float(torch.linalg.matrix_norm(path.iterates[-1], "nuc")) >= 0.99 * 1e3
    assert int(A.numerical_rank(path.iterates[-1], 1e-3)) == 1


def test_closed_form_and_autograd_paths_agree(a1):
    """With no head the path uses closed-form gradients; an explicit LinearHead() goes through
    autograd. Same iterates."""
    problem, _, _ = a1
    W0 = 0.1 * torch.randn(2, 2, generator=A.set_seed(2), dtype=F64)
    a = A.regularization_path(A.WAttention(W0), problem, RADII[:5], steps=50)
    b = A.regularization_path(A.WAttention(W0), problem, RADII[:5], steps=50, head=A.LinearHead())
    assert torch.allclose(a.iterates, b.iterates, rtol=1e-8, atol=1e-10)


def test_batched_path_equals_per_trial(a1):
    problem, _, _ = a1
    starts = torch.randn(3, 2, 2, generator=A.set_seed(3), dtype=F64)
    stacked = A.Problem.stack([problem] * 3)
    batched = A.regularization_path(A.WAttention(starts), stacked, RADII[:4], steps=50)
    for b in range(3):
        single = A.regularization_path(A.WAttention(starts[b]), problem, RADII[:4], steps=50)
        assert torch.allclose(batched.iterates[:, b], single.iterates, rtol=1e-12, atol=1e-12)
        assert torch.allclose(batched.loss[:, b], single.loss, rtol=1e-12)


def test_cone_path_local_convergence():
    """The cone-restricted path corr(W, W_mm(alpha)) >= 1 - mu (mu = 0.1) stays in the cone, and
    converges to W_mm(alpha) where alpha is locally optimal; where it is not, it stays pinned to
    the cone's boundary. alpha = the tokens 300 NGD steps select on A3-style instances."""
    g = A.set_seed(5)
    problem = A.random_problem(6, 8, 10, trials=8, generator=g)
    att = A.WAttention.zeros(10, trials=8)
    A.train(att, problem, 300)
    alpha = A.selected_tokens(att.probabilities(problem))
    svms = [A.att_svm(problem.trial(b).X, problem.trial(b).Z, alpha[b]) for b in range(8)]
    directions = torch.stack([s.W for s in svms])
    local = torch.tensor([bool(A.is_locally_optimal(problem.trial(b), alpha[b], svms[b]).all())
                          for b in range(8)])
    assert local.any() and not local.all()
    mu = 0.1
    start = A.WAttention(torch.randn(8, 10, 10, generator=g, dtype=F64))
    path = A.regularization_path(start, problem, RADII, steps=300, cone=(directions, mu))
    c = A.corr(path.iterates, directions, 2)                     # (radii, trials)
    assert (c >= 1 - mu - 1e-12).all()
    assert (c[-1][local] >= 0.9999).all()
    assert torch.allclose(c[-1][~local], torch.full_like(c[-1][~local], 1 - mu), atol=1e-9)


def test_path_bad_input(a1):
    problem, fro, _ = a1
    W = A.WAttention(torch.eye(2, dtype=F64))
    for radii in ([1.0, 0.5], [-1.0, 2.0], [0.0, 1.0], [], [[1.0, 2.0]]):
        with pytest.raises(ValueError, match="radii must be a non-empty increasing sequence"):
            A.regularization_path(W, problem, radii)
    with pytest.raises(ValueError, match="needs a nonzero starting point"):
        A.regularization_path(A.WAttention.zeros(2), problem, [1.0])
    with pytest.raises(ValueError, match="cone constraint is defined for the W and p"):
        A.regularization_path(A.KQAttention.init(2), problem, [1.0], cone=(fro.W, 0.1))


def test_path_unknown_loss_is_value_error(a1):
    problem, _, _ = a1
    with pytest.raises(ValueError, match="unknown loss"):
        A.regularization_path(A.WAttention(torch.eye(2, dtype=F64)), problem, [1.0], loss="hinge")


@pytest.mark.parametrize("case", ["mu out of range", "direction shape"])
def test_path_bad_cone_is_value_error(a1, case):
    problem, fro, _ = a1
    cone = (fro.W, 3.0) if case == "mu out of range" else (torch.eye(3, dtype=F64), 0.1)
    with pytest.raises(ValueError):
        A.regularization_path(A.WAttention(torch.eye(2, dtype=F64)), problem, [1.0], cone=cone)
