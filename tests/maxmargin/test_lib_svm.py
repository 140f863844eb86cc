"""The max-margin problems (attnsvm.maxmargin.svm): hand-solved cases, KKT conditions on random instances,
agreement with independent formulations, infeasibility, local optimality and the p-SVM.

Independent formulations used as references:
- Frobenius: least-distance programming by NNLS (Lawson and Hanson, ch. 23), written here from
  scratch on the full d*d outer-product features, and a per-constraint cvxpy model solved by Clarabel;
- nuclear: the semidefinite model min (tr P + tr Q)/2 s.t. [[P, W], [W^T, Q]] >> 0;
- feasibility: a linear program (HiGHS via scipy.optimize.linprog).
"""

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest
import scipy.optimize
import torch

import attnsvm as A

TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


# --- independent references -----------------------------------------------------------------------

def features(X, Z, alpha):
    """Rows vec((x_{i,alpha_i} - x_it) z_i^T) for t != alpha_i, shape (n (T-1), d*d)."""
    X, Z, alpha = np.asarray(X), np.asarray(Z), np.asarray(alpha)
    n, T, d = X.shape
    return np.array([np.outer(X[i, alpha[i]] - X[i, t], Z[i]).ravel()
                     for i in range(n) for t in range(T) if t != alpha[i]])


def ldp_solution(G, h):
    """min ||x|| s.t. G x >= h by NNLS; None if infeasible."""
    m, k = G.shape
    E = np.vstack([G.T, h[None, :]])
    f = np.zeros(k + 1)
    f[-1] = 1.0
    u, _ = scipy.optimize.nnls(E, f, maxiter=50 * (m + k))
    r = E @ u - f
    if np.linalg.norm(r) < 1e-10:
        return None
    return -r[:k] / r[k]


def loop_cvxpy(X, Z, alpha, norm):
    """One cvxpy constraint per (i, t), W a d x d variable, solved by Clarabel."""
    X, Z, alpha = np.asarray(X), np.asarray(Z), np.asarray(alpha)
    n, T, d = X.shape
    W = cp.Variable((d, d))
    constraints = [(X[i, alpha[i]] - X[i, t]) @ W @ Z[i] >= 1
                   for i in range(n) for t in range(T) if t != alpha[i]]
    problem = cp.Problem(cp.Minimize(cp.norm(W, norm)), constraints)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem.solve(solver=cp.CLARABEL, **TIGHT)
    assert problem.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
    return W.value, problem.value


def psd_nuclear(X, Z, alpha):
    """min (tr P + tr Q)/2 over [[P, W], [W^T, Q]] >> 0 with the Att-SVM constraints on W."""
    X, Z, alpha = np.asarray(X), np.asarray(Z), np.asarray(alpha)
    n, T, d = X.shape
    M = cp.Variable((2 * d, 2 * d), PSD=True)
    W = M[:d, d:]
    constraints = [(X[i, alpha[i]] - X[i, t]) @ W @ Z[i] >= 1
                   for i in range(n) for t in range(T) if t != alpha[i]]
    problem = cp.Problem(cp.Minimize((cp.trace(M[:d, :d]) + cp.trace(M[d:, d:])) / 2), constraints)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem.solve(solver=cp.CLARABEL, **TIGHT)
    assert problem.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
    return W.value, problem.value


def lp_feasible(F):
    result = scipy.optimize.linprog(np.zeros(F.shape[1]), A_ub=-F, b_ub=-np.ones(F.shape[0]),
                                    bounds=(None, None), method="highs")
    assert result.status in (0, 2)
    return result.status == 0


def random_feasible(seed, n=4, T=5, d=6):
    """A random A3-style instance (unit Gaussian) with alpha = opt."""
    p = A.random_problem(n, T, d, generator=A.set_seed(seed))
    return p, p.opt


def tensor(rows):
    return torch.tensor(rows, dtype=torch.float64)


# --- hand-solved cases -----------------------------------------------------------------------------

@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_hand_single_constraint(norm):
    """n=1, T=2, z=e1, x_1 - x_2 = (2, 0): 2 W_11 >= 1, so W = [[0.5, 0], [0, 0]]."""
    X, Z = tensor([[[1.5, 0.3], [-0.5, 0.3]]]), tensor([[1.0, 0.0]])
    r = A.att_svm(X, Z, [0], norm=norm)
    assert torch.allclose(r.W, tensor([[0.5, 0.0], [0.0, 0.0]]), atol=1e-8)
    assert r.objective == pytest.approx(0.5, rel=1e-8)
    assert r.norm == norm and r.rank == 1
    assert r.margins[0, 0] == math.inf and float(r.margins[0, 1]) == pytest.approx(1.0, abs=1e-8)
    assert r.support.tolist() == [[False, True]] and r.min_margin == pytest.approx(1.0, abs=1e-8)


def test_hand_oblique_query():
    """z = (3, 4), tokens (1,0) [selected], (0,1), (0,-1): u = W z must satisfy u_1 - u_2 >= 1 and
    u_1 + u_2 >= 1, so u = (1, 0), and the minimum-norm W = u z^T / |z|^2 = [[.12, .16], [0, 0]]."""
    X, Z = tensor([[[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]]), tensor([[3.0, 4.0]])
    for norm in ("fro", "nuc"):
        r = A.att_svm(X, Z, torch.tensor([0]), norm=norm)
        assert torch.allclose(r.W, tensor([[0.12, 0.16], [0.0, 0.0]]), atol=1e-8)
        assert r.objective == pytest.approx(0.2, rel=1e-8)
        assert r.support.tolist() == [[False, True, True]]


def test_hand_nuclear_and_frobenius_differ():
    """Constraints W_11 >= 1 (and 2 W_11 >= 1), W_22 >= 1, W_12 >= 1.

    Frobenius: W = [[1, 1], [0, 1]] (norm sqrt 3, rank 2, nuclear norm sqrt 5). Nuclear: tr W >= 2
    bounds ||W||_* >= 2 (dual certificate U = I), attained only by the symmetric PSD
    W = [[1, 1], [1, 1]] (rank 1). Near it the nuclear norm grows only quadratically:
    ||W + [[0, a], [b, 0]]||_* = sqrt(4 + (a - b)^2) whenever a + b + ab <= 0, so a solver accurate
    to 1e-9 in the objective fixes W only to ~sqrt(1e-9): hence the looser tolerance on the
    nuclear W entries.
    """
    X = tensor([[[1.0, 0.0], [0.0, 0.0], [-1.0, 0.0]],
                [[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]])
    Z = tensor([[1.0, 0.0], [0.0, 1.0]])
    fro = A.att_svm(X, Z, [0, 0], norm="fro")
    assert torch.allclose(fro.W, tensor([[1.0, 1.0], [0.0, 1.0]]), atol=1e-8)
    assert fro.objective == pytest.approx(math.sqrt(3), rel=1e-8) and fro.rank == 2
    assert fro.support.tolist() == [[False, True, False], [False, True, True]]
    assert torch.allclose(fro.margins[:, 1:], tensor([[1.0, 2.0], [1.0, 1.0]]), atol=1e-8)
    nuc = A.att_svm(X, Z, [0, 0], norm="nuc")
    assert nuc.objective == pytest.approx(2.0, rel=1e-8)
    assert torch.allclose(nuc.W, tensor([[1.0, 1.0], [1.0, 1.0]]), atol=1e-4)
    assert nuc.rank == 1
    assert float(torch.linalg.matrix_norm(fro.W, "nuc")) == pytest.approx(math.sqrt(5), rel=1e-8)


def test_hand_two_queries_three_dims_and_local_optimality():
    """d=3, v = e3 (third coordinate = score), queries e1 and e2 (so W e1 and W e2 are free).

    Example 0 selects (1,0,1) (score 1); the tokens (0,+-1,0) (score 0) give u_1 = W e1 = (.5, 0, .5)
    with both active, (-10, 0, 5) (score 5) has margin 3.5: locally optimal, not globally.
    Example 1 selects (1,0,0) (score 0) against (0,1,1) (score 1) and (0,-1,0): the differences
    (1,-1,-1) and (1,1,0) are orthogonal, so u_2 = (1,-1,-1)/3 + (1,1,0)/2 = (5/6, 1/6, -1/3); its
    support token (0,1,1) scores higher than the selection: not locally optimal.
    """
    X = tensor([[[1, 0, 1], [0, 1, 0], [0, -1, 0], [-10, 0, 5]],
                [[1, 0, 0], [0, 1, 1], [0, -1, 0], [-10, 0, 5]]])
    Z = tensor([[1, 0, 0], [0, 1, 0]])
    problem = A.Problem(X, torch.ones(2), Z, tensor([0, 0, 1]))
    alpha = torch.tensor([0, 0])
    r = A.att_svm(problem.X, problem.Z, alpha)
    expected = torch.zeros(3, 3, dtype=torch.float64)
    expected[:, 0] = tensor([0.5, 0.0, 0.5])
    expected[:, 1] = tensor([5 / 6, 1 / 6, -1 / 3])
    assert torch.allclose(r.W, expected, atol=1e-8)
    assert r.support.tolist() == [[False, True, True, False], [False, True, True, False]]
    assert float(r.margins[0, 3]) == pytest.approx(3.5, rel=1e-8)
    assert float(r.margins[1, 3]) == pytest.approx(11 * 5 / 6 + 5 / 3, rel=1e-8)
    assert A.is_locally_optimal(problem, alpha, r).tolist() == [True, False]
    assert problem.opt.tolist() == [3, 3] and not bool(A.model.is_global(problem, alpha))
    # the global selection is locally optimal by definition
    opt = problem.opt
    assert A.is_locally_optimal(problem, opt, A.att_svm(problem.X, problem.Z, opt)).all()


@pytest.mark.parametrize("y3, expected, support", [
    (1.0, (4 / 3, 1 / 3), [False, True, True]),        # tight: multipliers 7/9 and 10/9
    (1.5, (1.25, 0.25), [False, True, True])])         # relaxed: multipliers 7/8 and 3/4
def test_hand_p_svm(y3, expected, support):
    """Paper B's joint-training geometry: keys {(0,0),(1,1)}, {(0,0),(1,-1)}, {(0,0),(.5,y3)},
    selection = second token. Active constraints p.(1,-1) = 1 and p.(.5,y3) = 1."""
    keys = tensor([[[0, 0], [1, 1]], [[0, 0], [1, -1]], [[0, 0], [0.5, y3]]])
    r = A.p_svm(keys, [1, 1, 1])
    assert torch.allclose(r.W, tensor(expected), atol=1e-8)
    assert r.objective == pytest.approx(math.hypot(*expected), rel=1e-8)
    assert r.support[:, 0].tolist() == support and not r.support[:, 1].any()
    assert float(r.margins[0, 0]) == pytest.approx(sum(expected), rel=1e-8)
    assert (r.margins[:, 1] == math.inf).all()


def test_p_svm_matches_att_svm_with_equal_queries():
    """With one shared query z, W z plays the role of p: W_mm = p_mm z^T / |z|^2."""
    p, alpha = random_feasible(40, n=3, T=4, d=5)
    z = p.Z[0]
    same = p.with_queries(z.expand(3, 5).clone())
    w = A.att_svm(same.X, same.Z, alpha)
    pv = A.p_svm(same.X, alpha)
    assert torch.allclose(w.W, torch.outer(pv.W, z) / z.dot(z), rtol=1e-6, atol=1e-8)
    assert torch.equal(w.support, pv.support)


# --- KKT conditions on random instances -------------------------------------------------------------

@pytest.mark.parametrize("seed, size", [(0, (4, 5, 6)), (1, (4, 5, 6)), (2, (6, 8, 10)),
                                        (3, (2, 6, 3)), (4, (5, 3, 3))])
def test_kkt_frobenius(seed, size):
    p, alpha = random_feasible(seed, *size)
    F = features(p.X, p.Z, alpha)
    if not lp_feasible(F):
        pytest.skip("instance infeasible")          # covered by the feasibility test
    r = A.att_svm(p.X, p.Z, alpha)
    n, T, d = size
    keep = torch.ones(n, T, dtype=torch.bool)
    keep[torch.arange(n), alpha] = False
    margins = r.margins[keep]
    # margins recomputed from W agree with the reported ones
    assert np.allclose(F @ r.W.numpy().ravel(), margins.numpy(), rtol=1e-10, atol=1e-12)
    assert float(margins.min()) >= 1 - 1e-7
    assert float(margins.min()) == pytest.approx(1.0, abs=1e-7)
    assert (r.margins[~keep] == math.inf).all()
    assert torch.equal(r.support[keep], margins <= 1 + 1e-5) and not r.support[~keep].any()
    # stationarity + dual feasibility: W is a nonnegative combination of the active features
    active = F[r.support[keep].numpy()]
    lam, residual = scipy.optimize.nnls(active.T, r.W.numpy().ravel())
    assert residual / np.linalg.norm(r.W.numpy()) < 1e-6
    assert (lam >= 0).all() and lam.sum() > 0
    # consequences: rank <= min(n, d); objective = ||W||_F
    assert r.rank <= min(n, d)
    assert r.objective == pytest.approx(float(r.W.norm()), rel=1e-12)


@pytest.mark.parametrize("seed, size", [(0, (4, 5, 6)), (2, (6, 8, 10)), (3, (2, 6, 3)),
                                        (5, (5, 5, 3))])
def test_nuclear_feasible_and_below_frobenius_solution(seed, size):
    p, alpha = random_feasible(seed, *size)
    if not lp_feasible(features(p.X, p.Z, alpha)):
        pytest.skip("instance infeasible")
    fro = A.att_svm(p.X, p.Z, alpha, norm="fro")
    nuc = A.att_svm(p.X, p.Z, alpha, norm="nuc")
    assert nuc.min_margin >= 1 - 1e-7 and nuc.min_margin == pytest.approx(1.0, abs=1e-6)
    assert nuc.objective == pytest.approx(float(torch.linalg.matrix_norm(nuc.W, "nuc")), rel=1e-12)
    # each solution is optimal for its own norm: cross comparisons
    assert nuc.objective <= float(torch.linalg.matrix_norm(fro.W, "nuc")) * (1 + 1e-7)
    assert fro.objective <= float(nuc.W.norm()) * (1 + 1e-7)
    assert nuc.rank <= fro.rank


# --- agreement with independent formulations --------------------------------------------------------

@pytest.mark.parametrize("seed, size", [(10, (4, 5, 6)), (11, (3, 8, 10)), (12, (5, 5, 5)),
                                        (13, (6, 3, 4)), (14, (8, 4, 3))])
def test_frobenius_matches_independent_solvers(seed, size):
    p, alpha = random_feasible(seed, *size)
    F = features(p.X, p.Z, alpha)
    reference = ldp_solution(F, np.ones(F.shape[0]))
    if reference is None:
        with pytest.raises(A.InfeasibleError):
            A.att_svm(p.X, p.Z, alpha)
        return
    d = size[2]
    reference = reference.reshape(d, d)
    ours = A.att_svm(p.X, p.Z, alpha).W.numpy()
    assert np.linalg.norm(ours - reference) / np.linalg.norm(reference) <= 1e-5
    looped, _ = loop_cvxpy(p.X, p.Z, alpha, "fro")
    assert np.linalg.norm(looped - reference) / np.linalg.norm(reference) <= 1e-5


@pytest.mark.parametrize("seed, size", [(10, (4, 5, 6)), (11, (3, 8, 10)), (12, (5, 5, 5)),
                                        (15, (5, 5, 3))])
def test_nuclear_objective_matches_semidefinite_formulation(seed, size):
    p, alpha = random_feasible(seed, *size)
    if not lp_feasible(features(p.X, p.Z, alpha)):
        pytest.skip("instance infeasible")
    ours = A.att_svm(p.X, p.Z, alpha, norm="nuc")
    W_ref, value = psd_nuclear(p.X, p.Z, alpha)
    assert abs(ours.objective - value) / value <= 1e-5
    _, looped = loop_cvxpy(p.X, p.Z, alpha, "nuc")
    assert abs(looped - value) / value <= 1e-5


def test_feasibility_verdict_matches_linear_program():
    """Small random instances (d=2, n up to 6, random selections): InfeasibleError exactly when
    the LP {W : A vec(W) >= 1} is empty; both outcomes occur."""
    gen = torch.Generator().manual_seed(7)
    verdicts = []
    for trial in range(40):
        n = 2 + trial % 5
        p = A.random_problem(n, 4, 2, generator=gen)
        alpha = torch.randint(0, 4, (n,), generator=gen)
        feasible = lp_feasible(features(p.X, p.Z, alpha))
        try:
            A.att_svm(p.X, p.Z, alpha)
            ours = True
        except A.InfeasibleError:
            ours = False
        assert ours == feasible, trial
        verdicts.append(feasible)
    assert any(verdicts) and not all(verdicts)


# --- infeasible problems ----------------------------------------------------------------------------

def test_infeasible_duplicate_selected_token():
    X = tensor([[[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    Z = tensor([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(A.InfeasibleError, match="example 1: its selected token appears twice"):
        A.att_svm(X, Z, [0, 0])
    assert issubclass(A.InfeasibleError, ValueError)
    A.att_svm(X, Z, [0, 2])                      # another selection is fine


def test_infeasible_selected_token_inside_convex_hull():
    # (0, 0) = 0.5 (1, 0) + 0.25 (-1, .5) + 0.25 (-1, -.5)
    X = tensor([[[0.0, 0.0], [1.0, 0.0], [-1.0, 0.5], [-1.0, -0.5]]])
    with pytest.raises(A.InfeasibleError, match="example 0: its selected token lies in the convex hull"):
        A.att_svm(X, tensor([[1.0, 0.0]]), [0], norm="nuc")
    assert A.att_svm(X, tensor([[1.0, 0.0]]), [1]).min_margin == pytest.approx(1.0, abs=1e-7)


def test_infeasible_jointly_with_dependent_queries():
    """Each example alone is feasible, but both queries are e1 and they ask for opposite signs
    of (W e1)_1."""
    X = tensor([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [1.0, 0.0]]])
    Z = tensor([[1.0, 0.0], [2.0, 0.0]])
    A.att_svm(X[:1], Z[:1], [0])
    A.att_svm(X[1:], Z[1:], [0])
    with pytest.raises(A.InfeasibleError, match="example 1 conflicts with example 0 "):
        A.att_svm(X, Z, [0, 0])
    # with independent queries the same tokens are feasible
    assert A.att_svm(X, tensor([[1.0, 0.0], [0.0, 1.0]]), [0, 0]).min_margin >= 1 - 1e-7


def test_infeasible_zero_query_and_p_svm():
    X = tensor([[[1.0, 0.0], [0.0, 0.0]]])
    with pytest.raises(A.InfeasibleError, match="example 0 has a zero query"):
        A.att_svm(X, tensor([[0.0, 0.0]]), [0])
    keys = tensor([[[0, 0], [1, 1]], [[1, 1], [1, 1]]])
    with pytest.raises(A.InfeasibleError,
                       match="p-SVM is infeasible: example 1: its selected token appears twice"):
        A.p_svm(keys, [1, 1])


# --- bad input ---------------------------------------------------------------------------------------

def test_svm_bad_input():
    p, alpha = random_feasible(0, 3, 4, 5)
    with pytest.raises(ValueError, match=r"alpha must hold token indices in \[0, 3\]"):
        A.att_svm(p.X, p.Z, [0, 1, 4])
    with pytest.raises(ValueError, match=r"alpha must hold token indices in \[0, 3\]"):
        A.att_svm(p.X, p.Z, [0, -1, 2])
    with pytest.raises(ValueError, match="alpha must be 3 integer token indices"):
        A.att_svm(p.X, p.Z, [0, 1])
    with pytest.raises(ValueError, match="alpha must be 3 integer token indices"):
        A.att_svm(p.X, p.Z, [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="norm must be 'fro' or 'nuc', got 'l1'"):
        A.att_svm(p.X, p.Z, alpha, norm="l1")
    with pytest.raises(ValueError, match="solve batched problems with att_svms"):
        A.att_svm(p.X[None], p.Z[None], alpha)
    with pytest.raises(ValueError, match=r"X must be \(n, T, d\) and Z \(n, d\)"):
        A.att_svm(p.X, p.Z[:, :2], alpha)
    with pytest.raises(ValueError, match="X contains NaN or inf"):
        A.att_svm(p.X * float("nan"), p.Z, alpha)
    with pytest.raises(ValueError, match="Z contains NaN or inf"):
        A.att_svm(p.X, p.Z * float("inf"), alpha)
    with pytest.raises(ValueError, match=r"keys must have shape \(n, T, d\)"):
        A.p_svm(p.X[0], alpha)
    with pytest.raises(ValueError, match="pass one instance"):
        batched = A.random_problem(3, 4, 5, trials=2)
        A.is_locally_optimal(batched, alpha, A.att_svm(p.X, p.Z, alpha))


def test_svm_accepts_numpy_and_lists():
    p, alpha = random_feasible(0, 3, 4, 5)
    a = A.att_svm(p.X, p.Z, alpha)
    b = A.att_svm(p.X.numpy(), p.Z.numpy().tolist(), alpha.numpy())
    assert torch.allclose(a.W, b.W, rtol=1e-9, atol=1e-12)
    assert a.W.dtype == torch.float64 and a.margins.shape == (3, 4) and a.support.dtype == torch.bool


# --- hard instances: call order, near-duplicate tokens, extreme scales ------------------------

F64 = torch.float64

def _instances(count, n=5, T=4, d=3, seed=1):
    g, out = A.set_seed(seed), []
    while len(out) < count:
        P = A.random_problem(n, T, d, generator=g)
        try:
            A.att_svm(P.X, P.Z, P.opt)
        except A.InfeasibleError:
            continue
        out.append(P)
    return out


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_answers_do_not_depend_on_call_order(norm):
    """Same input, same answer, whatever was solved before (no solver warm start)."""
    problems = _instances(10)
    forward = [A.att_svm(P.X, P.Z, P.opt, norm=norm).W for P in problems]
    backward = [A.att_svm(P.X, P.Z, P.opt, norm=norm).W for P in problems[::-1]][::-1]
    for a, b in zip(forward, backward):
        assert torch.equal(a, b)
    g, keys = A.set_seed(7), []
    while len(keys) < 10:
        P = A.random_problem(2, 3, 4, generator=g)
        try:
            A.p_svm(P.X, P.opt)
            keys.append((P.X, P.opt))
        except A.InfeasibleError:
            continue
    forward = [A.p_svm(k, a).W for k, a in keys]
    backward = [A.p_svm(k, a).W for k, a in keys[::-1]][::-1]
    for a, b in zip(forward, backward):
        assert torch.equal(a, b)


def _near_duplicate(eps, seed=2):
    P = A.random_problem(3, 4, 3, generator=A.set_seed(seed))
    X, a = P.X.clone(), int(P.opt[0])
    X[0, (a + 1) % 4] = X[0, a] + eps * torch.randn(3, generator=A.set_seed(seed + 1), dtype=F64)
    return X, P.Z, P.opt


@pytest.mark.parametrize("norm", ["fro", "nuc"])
@pytest.mark.parametrize("eps", [1e-3, 1e-6, 1e-9])
def test_near_duplicate_tokens_are_solved_to_the_constraints(norm, eps):
    """A token eps away from the selected one: feasible, with ||W|| ~ 1/eps; solved, and every
    margin >= 1 - 1e-6."""
    X, Z, alpha = _near_duplicate(eps)
    res = A.att_svm(X, Z, alpha, norm=norm)
    assert res.min_margin >= 1 - 1e-6 and res.objective > 0.1 / eps


@pytest.mark.parametrize("eps", [1e-10, 1e-12])
def test_margins_at_the_rounding_level_are_named_ill_conditioned(eps):
    X, Z, alpha = _near_duplicate(eps)
    for norm in ("fro", "nuc"):
        with pytest.raises(A.IllConditionedError, match="cannot decide feasibility"):
            A.att_svm(X, Z, alpha, norm=norm)


def test_exact_duplicate_is_infeasible_not_ill_conditioned():
    X, Z, alpha = _near_duplicate(0.0)
    with pytest.raises(A.InfeasibleError, match="appears twice"):
        A.att_svm(X, Z, alpha)


@pytest.mark.parametrize("norm", ["fro", "nuc"])
@pytest.mark.parametrize("scale", [1e-200, 1e-100, 1e-20, 1e20, 1e100, 1e200])
def test_extreme_scales_give_the_scaled_answer(norm, scale):
    """Att-SVM is homogeneous: scaling the tokens by c divides W by c. Checked from 1e-200 to
    1e200 (the screen and the solver see data of norm ~1)."""
    P = _instances(1, seed=4)[0]
    ref = A.att_svm(P.X, P.Z, P.opt, norm=norm)
    res = A.att_svm(P.X * scale, P.Z, P.opt, norm=norm)
    assert res.min_margin >= 1 - 1e-6
    assert math.isclose(res.objective * scale, ref.objective, rel_tol=1e-6)
    assert torch.allclose(res.W * scale, ref.W, rtol=1e-5, atol=1e-8 * ref.W.abs().max())


def test_p_svm_infeasibility_message_speaks_of_p_not_queries():
    keys = torch.tensor([[[1.0, 0.0], [0.0, 0.0]], [[-1.0, 0.0], [0.0, 0.0]]], dtype=F64)
    with pytest.raises(A.InfeasibleError) as info:
        A.p_svm(keys, torch.tensor([0, 0]))
    assert "single p" in str(info.value) and "quer" not in str(info.value)


def test_fast_rank_is_numerical_rank():
    """svm._rank (NumPy, moderate entries) against metrics.numerical_rank, including matrices whose
    singular values straddle the tolerance, zero, and extreme scales (the public function's path)."""
    from attnsvm.maxmargin.svm import _rank
    g = torch.Generator().manual_seed(0)
    for k in range(200):
        d = 1 + k % 7
        U, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
        V, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
        sigma = 10.0 ** -torch.empty(d, dtype=torch.float64).uniform_(0, 9, generator=g)
        W = U @ torch.diag(sigma) @ V.T * 10.0 ** (k % 5 - 2)
        for tol in (1e-5, 1e-3):
            assert _rank(W.numpy(), tol) == int(A.numerical_rank(W, tol))
    for W in (np.zeros((3, 3)), np.eye(3) * 1e200, np.diag([1e-200, 1e-206, 0.0])):
        assert _rank(W, 1e-5) == int(A.numerical_rank(torch.from_numpy(W), 1e-5))
