"""Gen-SVM, the finite part and the SVM-eq fit (paper A, nonlinear heads)."""

import re

import numpy as np
import pytest
import torch

import attnsvm as A

F64 = torch.float64


def _hand_instance():
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]], dtype=F64)
    Z = torch.tensor([[1.0, 0.0]], dtype=F64)
    return X, Z


def test_gen_svm_hand_solved():
    """O = {0, 1}: u = W z must have u1 = u2 and 2 u1 >= 1, so u = (1/2, 1/2), W = u z^T."""
    X, Z = _hand_instance()
    result = A.gen_svm(X, Z, torch.tensor([[True, True, False]]))
    assert torch.allclose(result.W, torch.tensor([[0.5, 0.0], [0.5, 0.0]], dtype=F64), atol=1e-12)
    assert abs(result.objective - np.sqrt(0.5)) < 1e-12
    assert bool(result.support[0, 2]) and torch.isinf(result.margins[0, :2]).all()


@pytest.mark.parametrize("seed", range(5))
def test_gen_svm_with_single_tokens_is_att_svm(seed):
    P = A.random_problem(3, 4, 5, generator=A.set_seed(seed))
    alpha = P.opt
    mask = torch.nn.functional.one_hot(alpha, 4).bool()
    gen, att = A.gen_svm(P.X, P.Z, mask), A.att_svm(P.X, P.Z, alpha)
    assert torch.allclose(gen.W, att.W, atol=1e-9)
    assert torch.equal(gen.support, att.support)


@pytest.mark.parametrize("seed", range(5))
def test_gen_svm_constraints_hold_and_norm_is_minimal(seed):
    P = A.random_problem(3, 5, 8, generator=A.set_seed(10 + seed))
    mask = torch.zeros(3, 5, dtype=torch.bool)
    mask[:, :2] = True
    result = A.gen_svm(P.X, P.Z, mask)
    logits = torch.einsum("ntd,de,ne->nt", P.X, result.W, P.Z)
    assert torch.allclose(logits[:, 0], logits[:, 1], atol=1e-10)             # equal inside O_i
    assert (logits[:, :1] - logits[:, 2:] >= 1 - 1e-9).all()                  # margin 1 outside
    assert result.support.any()
    # minimal: a small step towards 0 breaks a constraint (the solution is on the boundary)
    shrunk = 0.999 * result.W
    inner = torch.einsum("ntd,de,ne->nt", P.X, shrunk, P.Z)
    assert (inner[:, :1] - inner[:, 2:] < 1).any()


def test_gen_svm_agrees_with_cvxpy():
    cp = pytest.importorskip("cvxpy")
    P = A.random_problem(2, 4, 4, generator=A.set_seed(21))
    mask = torch.tensor([[True, True, False, False], [True, False, True, False]])
    result = A.gen_svm(P.X, P.Z, mask)
    X, Z = P.X.numpy(), P.Z.numpy()
    W = cp.Variable((4, 4))
    constraints = []
    for i in range(2):
        inside = np.flatnonzero(mask[i].numpy())
        for t in range(4):
            expr = (X[i, inside[0]] - X[i, t]) @ W @ Z[i]
            constraints.append(expr == 0 if mask[i, t] else expr >= 1)
    cp.Problem(cp.Minimize(cp.sum_squares(W)), constraints).solve(solver="CLARABEL")
    assert np.allclose(result.W.numpy(), W.value, atol=1e-6)


def test_gen_svm_infeasible_names_the_example():
    X, Z = _hand_instance()
    X = torch.cat([X, X.clone()])
    X[1, 2] = (X[1, 0] + X[1, 1]) / 2                 # a masked token between the two selected
    Z = torch.cat([Z, Z])
    mask = torch.tensor([[True, True, False]] * 2)
    with pytest.raises(A.InfeasibleError, match="example 1"):
        A.gen_svm(X, Z, mask)


def _near_degenerate(delta):
    """Two selected tokens and a third at (0.5 - delta)(1, 1): feasible for delta > 0, with a
    norm ~ 1 / delta; infeasible at delta = 0 (the third token is their average)."""
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.5 - delta, 0.5 - delta]]], dtype=F64)
    return X, torch.tensor([[1.0, 1.0]], dtype=F64), torch.tensor([[True, True, False]])


@pytest.mark.parametrize("delta", [1e-6, 1e-8, 1e-10])
def test_gen_svm_solves_feasible_nearly_degenerate_sets(delta):
    X, Z, sets = _near_degenerate(delta)
    result = A.gen_svm(X, Z, sets)
    logits = X[0] @ result.W @ Z[0]
    assert abs(float(logits[0] - logits[1])) <= 1e-6 * float(logits.abs().max())
    assert float(logits[0] - logits[2]) >= 1 - 1e-6
    assert 0.2 / delta <= float(result.W.norm()) <= 2 / delta      # ~ 1 / (2 delta) * sqrt(2)


@pytest.mark.parametrize("delta", [3e-11, 1e-12])
def test_gen_svm_grey_zone_is_undecided_not_infeasible(delta):
    """Feasible, but only with a norm ~1e11-1e12: float64 cannot tell this from rounding noise of
    an infeasible problem, so it must not answer "infeasible" (it did: InfeasibleError)."""
    X, Z, sets = _near_degenerate(delta)
    with pytest.raises(A.IllConditionedError, match="cannot decide"):
        A.gen_svm(X, Z, sets)


def test_gen_svm_exactly_degenerate_and_mixed_batches_are_infeasible():
    X, Z, sets = _near_degenerate(0.0)
    with pytest.raises(A.InfeasibleError, match="example 0"):
        A.gen_svm(X, Z, sets)
    grey, exact = _near_degenerate(3e-11), _near_degenerate(0.0)   # one example decides it
    X = torch.cat([grey[0], exact[0]])
    with pytest.raises(A.InfeasibleError, match="example 1"):
        A.gen_svm(X, torch.cat([grey[1], exact[1]]), torch.cat([grey[2], exact[2]]))


def test_finite_part_reproduces_the_log_ratios():
    P = A.random_problem(3, 5, 6, generator=A.set_seed(31))
    mask = torch.zeros(3, 5, dtype=torch.bool)
    mask[:, :3] = True
    s = torch.softmax(torch.randn(3, 5, generator=A.set_seed(32), dtype=F64), -1)
    W_fin = A.maxmargin.finite_part(P.X, P.Z, mask, s)
    logits = torch.einsum("ntd,de,ne->nt", P.X, W_fin, P.Z)
    for i in range(3):
        for t in (1, 2):
            assert abs(float(logits[i, 0] - logits[i, t] - torch.log(s[i, 0] / s[i, t]))) < 1e-10
    # least norm: W_fin lies in the span of the equality constraints' features
    single = torch.nn.functional.one_hot(P.opt, 5).bool()
    assert float(A.maxmargin.finite_part(P.X, P.Z, single, s).abs().max()) == 0.0


def test_svm_eq_fit_recovers_the_scale():
    W_dir = torch.randn(4, 4, generator=A.set_seed(41), dtype=F64)
    W_fin = torch.randn(4, 4, generator=A.set_seed(42), dtype=F64)
    C, prediction = A.maxmargin.svm_eq_fit(W_fin + 7.5 * W_dir, W_fin, W_dir)
    assert abs(C - 7.5) < 1e-12 and torch.allclose(prediction, W_fin + 7.5 * W_dir)
    batch = torch.stack([W_fin + c * W_dir for c in (1.0, 2.0, 3.0)])
    C, _ = A.maxmargin.svm_eq_fit(batch, W_fin, W_dir)
    assert torch.allclose(C, torch.tensor([1.0, 2.0, 3.0], dtype=F64))


def test_bad_input_is_refused():
    X, Z = _hand_instance()
    for mask, error, message in (
            (torch.tensor([[True, True, True]]), A.maxmargin.NoMarginError, "no margin constraint"),
            (torch.tensor([[False, False, False]]), ValueError, "selects no token"),
            (torch.tensor([[True, False]]), ValueError, "shape"),
            (torch.tensor([[1, 1, 0]]), TypeError, "boolean mask")):
        with pytest.raises(error, match=message):
            A.gen_svm(X, Z, mask)
    with pytest.raises(ValueError, match="NaN or inf"):
        A.gen_svm(torch.full_like(X, float("nan")), Z, torch.tensor([[True, False, False]]))
    mask = torch.tensor([[True, True, False]])
    with pytest.raises(ValueError, match="positive probability"):
        A.maxmargin.finite_part(X, Z, mask, torch.tensor([[1.0, 0.0, 0.0]], dtype=F64))
    with pytest.raises(ValueError, match="shape"):
        A.maxmargin.finite_part(X, Z, mask, torch.ones(2, 3, dtype=F64))
    with pytest.raises(ValueError, match="nonzero direction"):
        A.maxmargin.svm_eq_fit(torch.ones(2, 2), torch.zeros(2, 2), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="last two dimensions"):
        A.maxmargin.svm_eq_fit(torch.ones(2, 2), torch.zeros(3, 3), torch.ones(2, 2))
    for name, args in (("W", (torch.ones(0, 0), torch.zeros(0, 0), torch.ones(0, 0))),
                       ("W_dir", (torch.ones(2, 2), torch.zeros(2, 2), torch.ones(2, 0, 0)))):
        with pytest.raises(ValueError, match=rf"{name} has shape .* no entry: pass \(d, d\) matrices"):
            A.maxmargin.svm_eq_fit(*args)                                   # was an IndexError
    for shape, missing in (((2, 0), "token"), ((0, 3), "example"), ((0, 2, 3), "run")):
        with pytest.raises(ValueError, match=re.escape(f"shape {shape}: no {missing}; pass the final")):
            A.maxmargin.selected_sets(torch.zeros(shape, dtype=F64))        # was a normal return


def test_selected_sets_and_the_acceptance_filter():
    s = torch.tensor([[[0.6, 0.4 - 1e-7, 1e-7, 0.0]],          # clear: {0, 1}, two masked
                      [[0.5, 0.5 - 1e-4, 1e-4, 0.0]],          # 1e-4 is ambiguous
                      [[0.4, 0.3, 0.2, 0.1]]], dtype=F64)      # nothing masked
    sets, clear = A.maxmargin.selected_sets(s)
    assert sets[0, 0].tolist() == [True, True, False, False]
    assert clear.tolist() == [True, False, False]
    assert sets.shape == s.shape
    with pytest.raises(ValueError, match="masked < keep"):
        A.maxmargin.selected_sets(s, keep=1e-6, masked=1e-3)
    for bad in (torch.full((1, 2), float("nan"), dtype=F64), torch.tensor([0.5]), torch.ones(2, 2, dtype=torch.int64),
                torch.tensor([[1.5, -0.5]], dtype=F64)):
        with pytest.raises(ValueError):
            A.maxmargin.selected_sets(bad)


def test_gen_svm_and_selected_sets_honour_a_token_mask():
    """Causal attention: masked (future) tokens get no constraint and do not count as masked by
    training; the first position (one visible token) is allowed and unconstrained."""
    X = torch.randn(1, 3, 4, generator=A.set_seed(51), dtype=F64)
    X = X / X.norm(dim=-1, keepdim=True)
    P = A.Problem.sequence(X, torch.ones(1, 3, dtype=F64), torch.ones(4, dtype=F64) / 2, causal=True)
    sets = torch.tensor([[True, False, False], [True, False, False], [True, True, False]])
    result = A.gen_svm(P.X, P.Z, sets, mask=P.mask)
    assert bool(torch.isinf(result.margins[~P.mask]).all()) and bool(torch.isinf(result.margins[0]).all())
    assert float(result.margins[1, 1]) >= 1 - 1e-9
    with pytest.raises(ValueError, match="may not see"):
        A.gen_svm(P.X, P.Z, torch.tensor([[True, True, False]] * 3), mask=P.mask)
    uniform = A.WAttention.zeros(4).probabilities(P)          # W = 0: nothing chosen yet
    assert not bool(A.maxmargin.selected_sets(uniform, mask=P.mask)[1])
    assert bool(A.maxmargin.selected_sets(uniform)[1])                   # without the mask: wrongly clear
    with pytest.raises(ValueError, match="does not fit"):
        A.maxmargin.selected_sets(uniform, mask=torch.ones(2, 2, dtype=torch.bool))



def test_an_example_keeping_all_its_tokens_adds_equalities_only():
    P = A.random_problem(2, 4, 6, generator=A.set_seed(60))
    sets = torch.tensor([[True, True, True, True], [True, False, True, False]])
    W = A.gen_svm(P.X, P.Z, sets).W
    logits = torch.einsum("ntd,de,ne->nt", P.X, W, P.Z)
    assert float(logits[0].max() - logits[0].min()) < 1e-9
    assert float(logits[1, [0, 2]].min() - logits[1, [1, 3]].max()) > 1 - 1e-7
    s = torch.softmax(torch.randn(2, 4, generator=A.set_seed(61), dtype=F64), -1)
    W_fin = A.maxmargin.finite_part(P.X, P.Z, sets, s)
    fin = torch.einsum("ntd,de,ne->nt", P.X, W_fin, P.Z)
    assert torch.allclose(fin[0] - fin[0, 0], torch.log(s[0] / s[0, 0]), atol=1e-10)


def test_one_infeasible_example_alone_raises_not_a_huge_matrix():
    """A masked token on the segment between the two selected ones: its projected constraint is
    rounding noise, which must read as infeasible (not a matrix of norm 1e16)."""
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]], dtype=F64)
    Z = torch.tensor([[1.0, 0.0]], dtype=F64)
    for between in ([0.5, 0.5], [0.3, 0.7]):
        X[0, 2] = torch.tensor(between, dtype=F64)
        with pytest.raises(A.InfeasibleError, match="example 0"):
            A.gen_svm(X, Z, torch.tensor([[True, True, False]]))


def _relaxed_instance():
    """Input 0 keeps {x1, x2} and its masked token x3 = (2, 2) lies beyond them; input 1 keeps y1."""
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]],
                      [[1.0, 0.0], [0.0, 0.0], [0.0, -1.0]]], dtype=F64)
    Z = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=F64)
    sets = torch.tensor([[True, True, False], [True, False, False]])
    return X, Z, sets


def test_relaxed_gen_svm_hand_solved():
    """With z = e1 only u = W z matters. Input 0 asks u1 = u2, and its margin -u1 - 2 u2 >= 1
    contradicts input 1's u1 >= 1: Gen-SVM is infeasible. Relaxing input 0 drops that margin but
    keeps u1 = u2; with u1 >= 1 and u1 + u2 >= 1 the least-norm u is (1, 1)."""
    X, Z, sets = _relaxed_instance()
    with pytest.raises(A.InfeasibleError):
        A.gen_svm(X, Z, sets)
    result = A.gen_svm(X, Z, sets, relaxed=torch.tensor([True, False]))
    assert torch.allclose(result.W, torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=F64), atol=1e-12)
    assert abs(result.objective - np.sqrt(2)) < 1e-12
    assert torch.isinf(result.margins[0]).all()                       # no margin for input 0
    assert torch.allclose(result.margins[1, 1:], torch.tensor([1.0, 2.0], dtype=F64), atol=1e-12)
    assert result.support[1].tolist() == [False, True, False]
    # nothing relaxed: the ordinary Gen-SVM (same digits)
    P = A.random_problem(3, 4, 5, generator=A.set_seed(31))
    S = torch.tensor([[True, True, False, False], [True, False, False, False], [False, True, True, False]])
    assert torch.equal(A.gen_svm(P.X, P.Z, S, relaxed=torch.zeros(3, dtype=torch.bool)).W, A.gen_svm(P.X, P.Z, S).W)


@pytest.mark.parametrize("seed", range(4))
def test_relaxed_gen_svm_agrees_with_cvxpy(seed):
    """Independent solve: equalities for every example, margins only for the others."""
    cp = pytest.importorskip("cvxpy")
    P = A.random_problem(3, 4, 4, generator=A.set_seed(40 + seed))
    S = torch.tensor([[True, True, False, False], [True, False, True, False], [False, False, False, True]])
    free = torch.tensor([True, False, False]) if seed % 2 else torch.tensor([False, True, False])
    result = A.gen_svm(P.X, P.Z, S, relaxed=free)
    X, Z = P.X.numpy(), P.Z.numpy()
    W = cp.Variable((4, 4))
    constraints = []
    for i in range(3):
        inside = np.flatnonzero(S[i].numpy())
        for t in range(4):
            expr = (X[i, inside[0]] - X[i, t]) @ W @ Z[i]
            if S[i, t]:
                constraints.append(expr == 0)
            elif not free[i]:
                constraints.append(expr >= 1)
    cp.Problem(cp.Minimize(cp.sum_squares(W)), constraints).solve(solver="CLARABEL")
    assert np.allclose(result.W.numpy(), W.value, atol=1e-6)
    # the relaxed problem has fewer constraints: its norm is at most the full one's
    assert result.objective <= A.gen_svm(P.X, P.Z, S).objective + 1e-12
    assert torch.isinf(result.margins[free]).all()


def test_relaxed_gen_svm_refuses_bad_input():
    X, Z, sets = _relaxed_instance()
    with pytest.raises(ValueError, match="shape"):
        A.gen_svm(X, Z, sets, relaxed=torch.tensor([True]))
    with pytest.raises(TypeError, match="boolean"):
        A.gen_svm(X, Z, sets, relaxed=torch.tensor([1, 0]))
    with pytest.raises(A.maxmargin.NoMarginError, match="no margin constraint"):      # everything relaxed
        A.gen_svm(X, Z, sets, relaxed=torch.tensor([True, True]))


def _rows_by_loop(X, Z, mask, visible):
    """The constraint rows written out example by example, token by token."""
    equal, unequal, where = [], [], []
    for i in range(X.shape[0]):
        anchor = X[i, np.flatnonzero(mask[i])[0]]
        for t in range(X.shape[1]):
            row = np.outer(anchor - X[i, t], Z[i]).ravel()
            if mask[i, t] and t != np.flatnonzero(mask[i])[0]:
                equal.append(row)
            elif not mask[i, t] and visible[i, t]:
                unequal.append(row)
                where.append((i, t))
    d2 = X.shape[2] ** 2
    return np.array(equal).reshape(-1, d2), np.array(unequal).reshape(-1, d2), where


def test_constraint_rows_match_the_loop_and_the_one_check_path_matches_the_two_calls():
    from attnsvm.maxmargin.gensvm import _direction_and_finite_part, _rows
    rng, solved = np.random.default_rng(5), 0
    for trial in range(20):
        n, T, d = 3, 5, 4
        P = A.random_problem(n, T, d, generator=A.set_seed(70 + trial))
        X, Z = P.X.numpy(), P.Z.numpy()
        mask = rng.random((n, T)) < 0.4
        mask[np.arange(n), rng.integers(0, T, n)] = True           # every set non-empty
        visible = mask | (rng.random((n, T)) < 0.7)
        E, M, where = _rows(X, Z, mask, visible)
        E_ref, M_ref, where_ref = _rows_by_loop(X, Z, mask, visible)
        assert np.array_equal(E, E_ref) and np.array_equal(M, M_ref)
        assert list(zip(*where)) == where_ref
        sets = torch.from_numpy(mask)                                # a set may hold every token
        s = torch.softmax(torch.randn(n, T, dtype=F64, generator=A.set_seed(trial)), -1)
        try:
            W_dir = A.gen_svm(P.X, P.Z, sets).W
        except A.InfeasibleError:
            with pytest.raises(A.InfeasibleError):
                _direction_and_finite_part(X, Z, mask, s.numpy())
            continue
        both = _direction_and_finite_part(X, Z, mask, s.numpy())
        assert torch.equal(both[0], W_dir) and torch.equal(both[1], A.maxmargin.finite_part(P.X, P.Z, sets, s))
        solved += 1
    assert solved >= 10
