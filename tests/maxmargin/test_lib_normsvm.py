"""Att-SVM in lp and spectral norms, and the optimizers that pick them (mirror descent, spectral
descent, diagonal factorization)."""

import math

import pytest
import torch

import attnsvm as A

F64 = torch.float64


def _one_constraint():
    """One example, z = e1, tokens x_1 = (2, 1), x_2 = 0: the constraint (2, 1) . u >= 1 on u = W e1."""
    X = torch.tensor([[[2.0, 1.0], [0.0, 0.0]]], dtype=F64)
    return X, torch.tensor([[1.0, 0.0]], dtype=F64)


@pytest.mark.parametrize("p, u", [(2, (0.4, 0.2)), (1, (0.5, 0.0)),
                                  (3, (math.sqrt(2) / (1 + 2 * math.sqrt(2)), 1 / (1 + 2 * math.sqrt(2))))])
def test_lp_svm_hand_solved(p, u):
    """Hoelder: the lp solution of a . u >= 1 has |u_j|^(p-1) proportional to a_j."""
    X, Z = _one_constraint()
    result = A.norm_svm(X, Z, [0], p)
    expected = torch.tensor([[u[0], 0.0], [u[1], 0.0]], dtype=F64)
    assert torch.allclose(result.W, expected, atol=1e-6)
    assert result.norm == f"l{p:g}" and abs(result.min_margin - 1) < 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_l2_svm_is_att_svm_and_norms_are_minimal(seed):
    P = A.random_problem(3, 4, 5, generator=A.set_seed(seed))
    fro = A.att_svm(P.X, P.Z, P.opt)
    assert torch.allclose(A.norm_svm(P.X, P.Z, P.opt, 2).W, fro.W, atol=1e-6)
    solutions = {q: A.norm_svm(P.X, P.Z, P.opt, q).W for q in (1.5, 2, 3, "spectral")}
    for q, W in solutions.items():
        logits = torch.einsum("ntd,de,ne->nt", P.X, W, P.Z)
        gap = logits.gather(1, P.opt[:, None]) - logits
        others = torch.ones_like(gap, dtype=torch.bool).scatter(1, P.opt[:, None], False)
        assert bool((gap[others] >= 1 - 1e-6).all())
        for other in solutions.values():               # each is the smallest in its own norm
            assert float(A.maxmargin.matrix_norm(W, q)) <= float(A.maxmargin.matrix_norm(other, q)) * (1 + 1e-5)


def test_diagonal_svm_is_diagonal_and_beats_the_diagonal_of_others():
    P = A.random_problem(3, 3, 6, generator=A.set_seed(11))
    l1 = A.norm_svm(P.X, P.Z, P.opt, 1, diagonal=True)
    l2 = A.norm_svm(P.X, P.Z, P.opt, 2, diagonal=True)
    assert torch.equal(l1.W, torch.diag(torch.diagonal(l1.W)))
    assert float(A.maxmargin.matrix_norm(l1.W, 1)) <= float(A.maxmargin.matrix_norm(l2.W, 1)) * (1 + 1e-6)
    assert abs(l1.min_margin - 1) < 1e-6


def test_infeasible_and_bad_input():
    X = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]], dtype=F64)
    Z = torch.tensor([[1.0, 0.0]], dtype=F64)
    with pytest.raises(A.InfeasibleError, match="infeasible"):
        A.norm_svm(X, Z, [0], 1.5)
    X, Z = _one_constraint()
    for norm in (0.5, "nuc", math.nan, True, None):
        with pytest.raises(ValueError, match="norm must be"):
            A.norm_svm(X, Z, [0], norm)
    with pytest.raises(ValueError, match="diagonal=True takes an lp norm"):
        A.norm_svm(X, Z, [0], "spectral", diagonal=True)
    with pytest.raises(TypeError):
        A.norm_svm(X, Z, [0], 2, diagonal="yes")


def test_mirror_and_spectral_steps_match_hand_computation():
    P = A.random_problem(3, 4, 5, trials=2, generator=A.set_seed(21))
    W0 = torch.randn(2, 5, 5, generator=A.set_seed(22), dtype=F64)
    model = A.WAttention(W0.clone())
    (g,) = torch.autograd.grad(A.empirical_risk(model, P).sum(), model.W)
    unit = g / g.flatten(1).norm(dim=-1)[:, None, None]
    p = 3.0
    u = torch.sign(W0) * W0.abs() ** (p - 1) - 0.1 * unit
    expected = torch.sign(u) * u.abs() ** (1 / (p - 1))
    att = A.WAttention(W0.clone())
    A.train(att, P, 1, 0.1, "mirror", p=p)
    assert torch.allclose(att.W, expected, rtol=1e-10, atol=1e-12)
    U, S, Vh = torch.linalg.svd(g)
    assert bool((S[:, 3:] < 1e-15 * S[:, :1]).all())      # rank n = 3: the rest is rounding
    att = A.WAttention(W0.clone())
    A.train(att, P, 1, 0.1, "spectral")
    assert torch.allclose(att.W, W0 - 0.1 * U[..., :3] @ Vh[..., :3, :], rtol=1e-10, atol=1e-12)


def test_each_optimizer_ends_nearest_its_own_svm():
    """Mirror descent (p = 1.75) and spectral descent on an A3-sized instance on which every
    method selects opt (seed 5; on seeds 3 and 4 some method stops at a local selection)."""
    P = A.random_problem(6, 8, 10, generator=A.set_seed(5))
    svms = {q: A.norm_svm(P.X, P.Z, P.opt, q).W for q in (1.75, 2, "spectral")}
    def margin(W, q):                                 # normalized margin in the norm q
        logits = torch.einsum("ntd,de,ne->nt", P.X, W, P.Z)
        gap = (logits.gather(1, P.opt[:, None]) - logits).scatter(1, P.opt[:, None], torch.inf)
        return float(gap.min() / A.maxmargin.matrix_norm(W, q))

    for method, kw, own in (("mirror", dict(p=1.75), 1.75), ("spectral", {}, "spectral"),
                            ("ngd", {}, 2)):
        att = A.WAttention.zeros(10)
        A.train(att, P, 2000, 0.1, method, **kw)
        assert bool((A.selected_tokens(att.probabilities(P)) == P.opt).all())
        W = att.W.detach()
        corrs = {q: float(A.corr(W, S)) for q, S in svms.items()}
        assert max(corrs, key=corrs.get) == own, (method, corrs)
        if own != "spectral":
            assert corrs[own] > 0.99, (method, corrs)
        else:   # the spectral SVM's solution set need not be one point: compare margins instead
            best = margin(svms[own], own)
            assert margin(W, own) > 0.97 * best, (margin(W, own), best)
            assert all(margin(W, own) > margin(S, own) for q, S in svms.items() if q != own)


def test_diagonal_attention_is_w_attention_of_its_diagonal():
    P = A.random_problem(3, 4, 5, generator=A.set_seed(31))
    k = torch.randn(5, generator=A.set_seed(32), dtype=F64)
    q = torch.randn(5, generator=A.set_seed(33), dtype=F64)
    diag = A.model.DiagonalAttention(k, q)
    assert torch.allclose(diag.logits(P), A.WAttention(torch.diag(k * q)).logits(P))
    start = A.model.DiagonalAttention.init(5)
    assert bool((start.params[1] == 0).all()) and bool((start.params[0] == 0.1).all())
    h = A.train(start, P, 5, 0.1)
    assert h.loss[-1] < h.loss[0]
    with pytest.raises(ValueError, match="shape"):
        A.model.DiagonalAttention(k, q[:3])
    with pytest.raises(ValueError, match="max_step does not apply"):
        A.train(A.WAttention.zeros(5), P, 2, method="mirror", max_step=1.0)
    with pytest.raises(ValueError, match="exponent p must be > 1"):
        A.train(A.WAttention.zeros(5), P, 2, method="mirror", p=1.0)


def test_linf_svm_one_constraint_by_hand():
    """min ||W||_max s.t. <F, W> >= 1 has value 1 / ||F||_1 (Hoelder), attained at sign(F) / ||F||_1."""
    X = torch.tensor([[[1.0, 0.5], [-0.5, 2.0]]], dtype=torch.float64)
    Z = torch.tensor([[0.3, -1.2]], dtype=torch.float64)
    F = torch.outer(X[0, 0] - X[0, 1], Z[0])
    res = A.norm_svm(X, Z, [0], math.inf)
    assert res.norm == "linf" and res.unique is False and res.accuracy == "solver"
    assert res.objective == pytest.approx(1 / float(F.abs().sum()), rel=1e-7)
    assert float(A.maxmargin.matrix_norm(res.W, math.inf)) == pytest.approx(res.objective, rel=1e-12)
    assert res.min_margin == pytest.approx(1.0, abs=1e-7)


def test_linf_svm_is_smallest_in_its_norm():
    P = A.random_problem(4, 5, 4, generator=A.set_seed(3))
    sol = {q: A.norm_svm(P.X, P.Z, P.opt, q) for q in (2, math.inf)}
    for q, other in ((math.inf, 2), (2, math.inf)):
        mine = float(A.maxmargin.matrix_norm(sol[q].W, q))
        theirs = float(A.maxmargin.matrix_norm(sol[other].W, q)) / sol[other].min_margin
        assert mine <= theirs * (1 + 1e-6)
    assert float(A.maxmargin.matrix_norm(sol[math.inf].W, math.inf)) < float(A.maxmargin.matrix_norm(sol[2].W, math.inf))


def test_sign_descent_steps_are_signs():
    P = A.random_problem(3, 4, 3, generator=A.set_seed(1))
    att = A.WAttention.zeros(3)
    A.train(att, P, 1, 0.1, "sign")
    assert set(att.W.detach().abs().flatten().tolist()) <= {0.0, 0.1}
    again = A.WAttention.zeros(3)
    A.train(again, P, 1, 0.1, "sign")
    assert torch.equal(att.W, again.W)


def test_threads_do_not_share_a_compiled_problem():
    import threading
    P = A.random_problem(3, 4, 5, trials=12, generator=A.set_seed(1))
    alone = [A.norm_svm(P.X[b], P.Z[b], P.opt[b], "spectral").W for b in range(12)]
    found, errors = {}, []

    def solve(offset):
        for b in range(offset, 12, 2):
            try:
                found[b] = A.norm_svm(P.X[b], P.Z[b], P.opt[b], "spectral").W
            except ValueError as error:
                errors.append(error)
    threads = [threading.Thread(target=solve, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(torch.equal(found[b], alone[b]) for b in range(12))
