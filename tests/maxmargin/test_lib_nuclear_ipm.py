"""The certified interior-point method for Att-SVM* (attnsvm.maxmargin._nuclear_ipm) and the batched att_svms.

References are independent: closed forms, and cvxpy's own nuclear-norm atom in the primal form
over all d x d matrices (Clarabel, tight tolerances), never the library's reduction or dual form.
"""

import cvxpy as cp
import numpy as np
import pytest
import torch

import attnsvm as A
from attnsvm.maxmargin._nuclear_ipm import GAP_TOL, certified_nuclear_svms

F64 = torch.float64


def _reference(U: np.ndarray, V: np.ndarray, with_W: bool = False):
    """min ||W||_* s.t. u_k^T W v_k >= 1, by cvxpy's normNuc atom (primal, all p x q matrices):
    the optimum, and with ``with_W`` the solution too."""
    W = cp.Variable((U.shape[1], V.shape[1]))
    constraints = [cp.sum(cp.multiply(W, np.outer(u, v))) >= 1 for u, v in zip(U, V)]
    problem = cp.Problem(cp.Minimize(cp.normNuc(W)), constraints)
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return (float(problem.value), W.value) if with_W else float(problem.value)


def _random_batch(B, m, p, q, seed):
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(B, m, p, generator=g, dtype=F64)
    V = torch.randn(B, m, q, generator=g, dtype=F64)
    return U, V


def _feasible_batch(B, m, p, q, seed):
    """Instances made feasible by construction: flip each constraint to agree with a random W0."""
    U, V = _random_batch(B, m, p, q, seed)
    W0 = torch.randn(B, p, q, generator=torch.Generator().manual_seed(seed + 1), dtype=F64)
    sign = torch.sign(((U @ W0) * V).sum(-1))
    return U * sign[..., None], V


@pytest.mark.parametrize("m, p, q", [(1, 1, 1), (3, 2, 2), (8, 4, 3), (12, 6, 6), (20, 5, 8)])
def test_matches_an_independent_solver_with_a_certificate(m, p, q):
    U, V = _feasible_batch(4, m, p, q, seed=10 * m + p)
    found = certified_nuclear_svms(U, V)
    for b, certificate in enumerate(found):
        assert certificate is not None
        W, lam = certificate.W, certificate.lam
        margins = ((U[b] @ W) * V[b]).sum(-1)
        assert float(margins.min()) >= 1 - 1e-12                              # primal feasible
        S = (U[b] * lam[:, None]).T @ V[b]
        assert bool((lam >= 0).all()) and float(torch.linalg.matrix_norm(S, 2)) <= 1 + 1e-12
        value = float(torch.linalg.svdvals(W).sum())
        assert value == pytest.approx(certificate.value, rel=1e-12)
        assert float(lam.sum()) <= value and certificate.gap <= GAP_TOL          # weak duality
        optimum, W_ref = _reference(U[b].numpy(), V[b].numpy(), with_W=True)
        assert value == pytest.approx(optimum, rel=1e-7)
        # generic instances have one solution: W itself, and its rank, are the reference's
        W_ref = torch.from_numpy(W_ref)
        assert float((W - W_ref).norm() / W_ref.norm()) < 1e-4
        assert int(A.numerical_rank(W, 1e-5)) == int(A.numerical_rank(W_ref, 1e-5))


def test_closed_forms():
    # one constraint u^T W v >= 1: the optimum is 1 / (|u| |v|), at W = u v^T / (|u|^2 |v|^2)
    u, v = torch.tensor([[3.0, 4.0]], dtype=F64), torch.tensor([[1.0, 0.0, 0.0]], dtype=F64)
    (one,) = certified_nuclear_svms(u[None], v[None])
    assert one.value == pytest.approx(1 / 5, rel=1e-9)
    assert torch.allclose(one.W, torch.outer(u[0], v[0]) / 25, atol=1e-9)
    # W_kk >= 1 for k = 1..4: trace <= nuclear norm, so the optimum is 4, at W = I
    eye = torch.eye(4, dtype=F64)
    (diag,) = certified_nuclear_svms(eye[None], eye[None])
    assert diag.value == pytest.approx(4.0, rel=1e-9)
    assert torch.allclose(diag.W, eye, atol=1e-6)


def test_a_batch_gives_what_each_instance_gives_alone():
    U, V = _feasible_batch(6, 10, 5, 4, seed=3)
    together = certified_nuclear_svms(U, V)
    for b in range(6):
        (alone,) = certified_nuclear_svms(U[b:b + 1], V[b:b + 1])
        assert alone.value == pytest.approx(together[b].value, rel=1e-9)
        # not only the certified value: the same matrix, to the method's accuracy, and rank
        assert float((alone.W - together[b].W).norm() / alone.W.norm()) < 1e-6
        assert int(A.numerical_rank(alone.W, 1e-5)) == int(A.numerical_rank(together[b].W, 1e-5))


def test_no_certificate_without_a_solution():
    # u^T W v >= 1 and (-u)^T W v >= 1 contradict each other: no certificate may be returned
    u, v = torch.tensor([1.0, 2.0], dtype=F64), torch.tensor([0.5, -1.0], dtype=F64)
    U, V = torch.stack([u, -u])[None], torch.stack([v, v])[None]
    assert certified_nuclear_svms(U, V) == [None]
    # mixed with solvable instances, only the infeasible one gets None
    Uf, Vf = _feasible_batch(2, 2, 2, 2, seed=5)
    found = certified_nuclear_svms(torch.cat([Uf, U]), torch.cat([Vf, V]))
    assert found[0] is not None and found[1] is not None and found[2] is None


def test_bad_input_is_refused():
    U, V = _feasible_batch(2, 3, 2, 2, seed=1)
    for bad_U, bad_V in [(U[0], V[0]), (U, V[:, :2]), (U[:, :0], V[:, :0]), (U[:1], V)]:
        with pytest.raises(ValueError, match="U \\(B, m, p\\) and V \\(B, m, q\\)"):
            certified_nuclear_svms(bad_U, bad_V)
    U_nan = U.clone()
    U_nan[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        certified_nuclear_svms(U_nan, V)


def test_results_report_how_they_were_solved():
    P = A.random_problem(3, 4, 5, trials=2, generator=A.set_seed(2))
    one = P.trial(0)
    assert A.att_svm(one.X, one.Z, one.opt, "nuc").accuracy == "solver"
    assert A.att_svm(one.X, one.Z, one.opt, "fro").accuracy == "exact"
    assert A.att_svm(one.X, one.Z, one.opt, "nuc", solver="SCS").accuracy == "solver"
    assert [r.accuracy for r in A.att_svms(P, P.opt, "nuc")] == ["certified", "certified"]
    assert [r.accuracy for r in A.att_svms(P, P.opt, "fro")] == ["exact", "exact"]


def test_att_svms_nuclear_against_the_full_primal():
    """Hard cases too: nearly dependent tokens (small margins) and many constraints per query."""
    checked = 0
    for seed, (n, T, d), spread in [(0, (3, 4, 5), 1.0), (1, (6, 8, 10), 1.0), (2, (2, 6, 3), 1.0),
                                    (3, (3, 3, 4), 1e-3), (4, (4, 3, 3), 1e-4)]:
        P = A.random_problem(n, T, d, trials=3, generator=A.set_seed(seed))
        X = P.X.clone()
        X[..., 1:, :] = X[..., :1, :] + spread * (X[..., 1:, :] - X[..., :1, :])   # tiny margins
        P = A.Problem(X, P.Y, P.Z, P.v)
        feasible = []
        for b in range(3):
            try:
                A.att_svm(P.X[b], P.Z[b], P.opt[b])
                feasible.append(b)
            except A.InfeasibleError:
                pass
        if not feasible:
            continue
        chosen = torch.tensor(feasible)
        for b, result in zip(feasible, A.att_svms(P.select(chosen), P.opt[chosen], "nuc")):
            diffs = X[b, torch.arange(n), P.opt[b]][:, None, :] - X[b]            # (n, T, d)
            keep = torch.ones(n, T, dtype=torch.bool)
            keep[torch.arange(n), P.opt[b]] = False
            U = diffs[keep].numpy()
            V = P.Z[b][:, None, :].expand(n, T, d)[keep].numpy()
            assert result.objective == pytest.approx(_reference(U, V), rel=1e-6)
            assert float(result.margins.min()) >= 1 - 1e-9
            assert result.accuracy == "certified"            # answered by the method under test
            checked += 1
    assert checked >= 8


def test_att_svms_equals_att_svm_per_trial_and_names_the_infeasible_trial():
    P = A.random_problem(4, 5, 6, trials=5, generator=A.set_seed(7))
    for norm in ("fro", "nuc"):
        batch = A.att_svms(P, P.opt, norm)
        for b, result in enumerate(batch):
            alone = A.att_svm(P.X[b], P.Z[b], P.opt[b], norm)
            assert result.objective == pytest.approx(alone.objective, rel=1e-9)
            assert result.rank == alone.rank
    X = P.X.clone()
    X[3, 0, 1] = X[3, 0, 0]                              # trial 3: the selected token is duplicated
    alpha = P.opt.clone()
    alpha[3, 0] = 0
    with pytest.raises(A.InfeasibleError, match="trial 3: .*appears twice"):
        A.att_svms(A.Problem(X, P.Y, P.Z, P.v), alpha, "nuc")


def test_att_svms_bad_input():
    P = A.random_problem(2, 3, 4, trials=2, generator=A.set_seed(0))
    with pytest.raises(TypeError, match="attnsvm Problem"):
        A.att_svms(P.X, P.opt)
    with pytest.raises(ValueError, match="one trials dimension"):
        A.att_svms(P.trial(0), P.opt[0])
    with pytest.raises(ValueError, match="alpha must have shape"):
        A.att_svms(P, P.opt[0])
    with pytest.raises(ValueError, match="norm must be"):
        A.att_svms(P, P.opt, "spectral")


def test_an_instance_without_a_certificate_goes_to_clarabel(monkeypatch):
    from attnsvm.maxmargin import _svm_core as svm_core
    P = A.random_problem(3, 4, 5, trials=3, generator=A.set_seed(4))
    certified = A.att_svms(P, P.opt, "nuc")
    real = svm_core.certified_nuclear_svms

    def drop_the_middle(U, V):                 # as if instance 1 had no certificate
        found = real(U, V)
        return [c if b != 1 else None for b, c in enumerate(found)]
    monkeypatch.setattr(svm_core, "certified_nuclear_svms", drop_the_middle)
    mixed = A.att_svms(P, P.opt, "nuc")
    assert [r.accuracy for r in mixed] == ["certified", "solver", "certified"]
    alone = A.att_svm(P.X[1], P.Z[1], P.opt[1], "nuc")
    assert torch.allclose(mixed[1].W, alone.W, atol=1e-12)
    for a, b in zip(mixed, certified):
        assert a.objective == pytest.approx(b.objective, rel=1e-8)


def test_many_constraints_on_a_small_core_go_to_clarabel():
    """m^3 against m (p + q)^4: 300 constraints on a 3 x 3 core are Clarabel's (dense m x m Schur
    complement avoided); the answer is the same problem's."""
    from attnsvm.maxmargin import _svm_core as svm_core
    assert not svm_core._suits_ipm(300, 3, 3) and svm_core._suits_ipm(70, 20, 5)
    assert svm_core._suits_ipm(400, 20, 20)                   # the cone has 820 entries
    P = A.random_problem(75, 5, 4, trials=2, generator=A.set_seed(8))       # m = 300, p + q <= 8
    W0 = torch.randn(4, 4, generator=torch.Generator().manual_seed(8), dtype=F64)
    alpha = torch.einsum("bntd,de,bne->bnt", P.X, W0, P.Z).argmax(-1)       # separable by W0
    results = A.att_svms(P, alpha, "nuc")
    assert [r.accuracy for r in results] == ["solver", "solver"]
    for b, result in enumerate(results):
        alone = A.att_svm(P.X[b], P.Z[b], alpha[b], "nuc")
        assert torch.allclose(result.W, alone.W, atol=1e-12)
