"""Sequence self-attention machinery of chapter 8 (attnsvm.studies.sequences)."""

import itertools
import math

import pytest
import torch

import attnsvm as A


def test_random_sequences_shapes_units_and_prefix():
    X, Y, v = A.studies.random_sequences(2, 4, 3, 5, A.set_seed(0))
    assert X.shape == (5, 2, 4, 3) and Y.shape == (5, 2, 4) and v.shape == (5, 3)
    assert torch.allclose(X.norm(dim=-1), torch.ones(5, 2, 4, dtype=torch.float64))
    assert set(Y.unique().tolist()) <= {-1.0, 1.0}
    Xk, Yk, vk = A.studies.random_sequences(2, 4, 3, 5, A.set_seed(0), keep=2)
    assert torch.equal(Xk, X[:2]) and torch.equal(Yk, Y[:2]) and torch.equal(vk, v[:2])


def test_reference_matches_the_flattened_problem_and_masks_exactly():
    X, Y, v = (t[0] for t in A.studies.random_sequences(2, 5, 4, 1, A.set_seed(1)))
    W = 30 * torch.randn(4, 4, generator=A.set_seed(2), dtype=torch.float64)
    for causal in (False, True):
        P = A.Problem.sequence(X, Y, v, causal=causal)
        f, risk, s = A.studies.self_attention_reference(W, X, Y, v, causal)
        att = A.WAttention(W)
        assert torch.allclose(A.predict(att, P).reshape(2, 5), f, atol=1e-12)
        assert float((A.empirical_risk(att, P).detach() - risk).abs()) < 1e-12
        if causal:
            assert float(s[:, ~torch.ones(5, 5, dtype=torch.bool).tril()].abs().max()) == 0.0
            assert torch.allclose(s[:, 0, 0], torch.ones(2, dtype=torch.float64))


def test_cover_fraction_against_brute_force_and_closed_forms():
    pts = torch.randn(6, 3, generator=A.set_seed(3), dtype=torch.float64)
    count = sum(A.studies.separable_through_origin(pts, torch.tensor(y, dtype=torch.float64))
                for y in itertools.product((-1.0, 1.0), repeat=6))
    assert count == round(A.studies.cover_fraction(6, 3) * 2 ** 6) == 2 * (1 + 5 + 10)
    assert A.studies.cover_fraction(4, 4) == 1.0 and A.studies.cover_fraction(8, 4) == 0.5
    assert A.studies.cover_fraction(3, 1) == pytest.approx(2 / 8)


def test_separable_hard_case_small_margin():
    pts = torch.tensor([[1.0, 1e-6], [1.0, -1e-6]], dtype=torch.float64)
    assert A.studies.separable_through_origin(pts, torch.tensor([1.0, -1.0], dtype=torch.float64))
    # a positive point strictly inside the cone of two negative ones: not separable
    pts = torch.tensor([[1.0, 0.1], [1.0, -0.1], [1.0, 0.0]], dtype=torch.float64)
    assert not A.studies.separable_through_origin(pts, torch.tensor([-1.0, -1.0, 1.0], dtype=torch.float64))
    # x and -x with the same label can never be separated
    pts = torch.tensor([[1.0, 2.0], [-1.0, -2.0]], dtype=torch.float64)
    assert not A.studies.separable_through_origin(pts, torch.tensor([1.0, 1.0], dtype=torch.float64))


def test_causal_pairs_condition_by_hand():
    """Sequence of 3 tokens in d = 1: positions 1 and 2 see tokens 0 and 1; selecting 0 at one and 1
    at the other needs their queries x_1, x_2 separable through the origin (opposite signs)."""
    X = torch.tensor([[[1.0], [1.0], [-1.0]]], dtype=torch.float64)
    assert A.studies.causal_pairs_separable(X, torch.tensor([[0, 0, 1]]))        # x_1 = 1, x_2 = -1: fine
    X_same = torch.tensor([[[1.0], [1.0], [2.0]]], dtype=torch.float64)
    assert not A.studies.causal_pairs_separable(X_same, torch.tensor([[0, 0, 1]]))   # same sign: blocked
    assert A.studies.causal_pairs_separable(X_same, torch.tensor([[0, 1, 1]]))


def test_smallest_logit_gaps_ignores_masked_tokens():
    X, Y, v = A.studies.random_sequences(1, 3, 3, 2, A.set_seed(4))
    P = A.Problem.sequence(X, Y, v, causal=True)
    W = torch.randn(2, 3, 3, generator=A.set_seed(5), dtype=torch.float64)
    gaps = A.studies.smallest_logit_gaps(W, P)
    logits = torch.einsum("bntd,bde,bne->bnt", P.X, W, P.Z)
    expect = []
    for b in range(2):
        best = math.inf
        for row in range(P.X.shape[1]):
            vis = logits[b, row][P.mask[row]]
            if len(vis) > 1:
                top = vis.max()
                best = min(best, float((top - vis)[vis < top].min()))
        expect.append(best)
    assert torch.allclose(gaps, torch.tensor(expect, dtype=torch.float64), atol=1e-12)


def test_ngd_until_gap_stops_runs_and_matches_plain_ngd_before():
    X, Y, v = A.studies.random_sequences(2, 4, 8, 3, A.set_seed(6))
    P = A.Problem.sequence(X, Y, v, causal=True)
    W, iterates, stop = A.studies.ngd_until_gap(P, 600, 0.5, 50.0, 100)
    assert iterates.shape == (7, 3, 8, 8) and bool((stop <= 600).all())
    gaps = A.studies.smallest_logit_gaps(W, P)
    assert bool((gaps[stop < 600] > 50).all())
    for b in range(3):                                     # frozen after its stop
        k = int(stop[b]) // 100
        assert torch.equal(iterates[k:, b], iterates[k, b].expand_as(iterates[k:, b]))
    att = A.WAttention.zeros(8, 3)
    A.train(att, P, 100, 0.5, "ngd", log_every=100)
    assert torch.allclose(att.W.detach(), iterates[1], atol=1e-12)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="keep"):
        A.studies.random_sequences(1, 2, 2, 3, A.set_seed(0), keep=4)
    with pytest.raises(ValueError, match="multiple"):
        X, Y, v = A.studies.random_sequences(1, 2, 2, 1, A.set_seed(0))
        A.studies.ngd_until_gap(A.Problem.sequence(X, Y, v), 10, 0.5, 10.0, 3)
    with pytest.raises(ValueError, match="700"):
        A.studies.ngd_until_gap(A.Problem.sequence(X, Y, v), 10, 0.5, 800.0, 5)


def _verdict(P):
    """att_svm on one instance: True, False (infeasible) or None (float64 cannot tell)."""
    try:
        A.att_svm(P.X, P.Z, P.opt, mask=P.mask)
        return True
    except A.InfeasibleError:
        return False
    except A.IllConditionedError:
        return None


def test_att_svm_feasible_matches_att_svm_trial_by_trial():
    X, Y, v = A.studies.random_sequences(2, 4, 2, 40, A.set_seed(7))
    problems = [A.Problem.sequence(X, Y, v), A.Problem.sequence(X, Y, v, causal=True),
                A.random_problem(8, 4, 2, trials=40, generator=A.set_seed(8))]
    own_mask = problems[2].X.new_ones(40, 8, 4, dtype=torch.bool)       # a mask per trial
    own_mask[::2, :, 0] = False
    problems.append(A.Problem(problems[2].X, problems[2].Y, problems[2].Z, problems[2].v, own_mask))
    seen = set()
    for P in problems:
        verdicts = A.att_svm_feasible(P)
        assert verdicts == [_verdict(P.trial(b)) for b in range(40)]
        seen |= set(verdicts)
    assert seen >= {True, False}                                  # both verdicts are exercised


def test_att_svm_feasible_hard_cases():
    # trial 0: the same two tokens and query, opposite labels, so each example selects the token
    # the other one does not: infeasible. Trial 1: near-duplicate tokens 1e-6 apart: a tiny but
    # real margin, feasible.
    a, b = [1.0, 0.0], [0.0, 1.0]
    X = torch.tensor([[[a, b], [a, b]], [[a, [1.0, 1e-6]], [b, [-1.0, 0.0]]]], dtype=torch.float64)
    Z = torch.tensor([[a, a], [a, b]], dtype=torch.float64)
    Y = torch.tensor([[1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    P = A.Problem(X, Y, Z, torch.tensor([1.0, 0.3], dtype=torch.float64))
    assert A.att_svm_feasible(P) == [_verdict(P.trial(0)), _verdict(P.trial(1))] == [False, True]


def test_att_svm_feasible_refuses_bad_problems():
    with pytest.raises(TypeError, match="Problem"):
        A.att_svm_feasible(torch.zeros(2, 3, 4, 2))
    P = A.random_problem(2, 3, 2, trials=2, generator=A.set_seed(0))
    with pytest.raises(ValueError, match="at most one trials dimension"):
        A.att_svm_feasible(A.Problem(P.X[None], P.Y[None], P.Z[None], P.v[None]))
    with pytest.raises(ValueError, match="alpha must have shape"):
        A.att_svm_feasible(P, P.opt[:, :1])


def test_att_svm_feasible_of_any_selection_and_of_one_instance():
    """One instance gives one verdict; a selection other than opt is tested as att_svm solves it."""
    P = A.random_problem(3, 4, 2, trials=30, generator=A.set_seed(12))
    alpha = torch.randint(0, 4, (30, 3), generator=A.set_seed(13))
    verdicts = A.att_svm_feasible(P, alpha)
    expected = []
    for b in range(30):
        try:
            A.att_svm(P.trial(b), alpha[b])
            expected.append(True)
        except A.InfeasibleError:
            expected.append(False)
    assert verdicts == expected and 0 < sum(expected) < 30
    assert [A.att_svm_feasible(P.trial(b), alpha[b]) for b in range(30)] == expected
    assert A.att_svm_feasible(P, alpha[0]) == A.att_svm_feasible(P, alpha[0].expand(30, 3))


def test_separability_batches_match_one_set_at_a_time():
    X, Y, _ = A.studies.random_sequences(2, 3, 4, 30, A.set_seed(9))       # 6 points in R^4 per draw
    joint = A.studies.separable_through_origin(X.reshape(30, 6, 4), Y.reshape(30, 6))
    assert joint.shape == (30,) and joint.dtype == torch.bool
    assert joint.tolist() == [A.studies.separable_through_origin(X[b].reshape(6, 4), Y[b].reshape(6))
                              for b in range(30)]
    assert 0 < int(joint.sum()) < 30                               # both verdicts occur
    each = A.studies.separable_through_origin(X, Y)
    assert each.shape == (30, 2)
    assert each.tolist() == [[A.studies.separable_through_origin(X[b, i], Y[b, i]) for i in range(2)]
                             for b in range(30)]
    X, _, _ = A.studies.random_sequences(2, 6, 2, 30, A.set_seed(10))
    sel = torch.randint(0, 6, (30, 2, 6), generator=A.set_seed(10))
    sel = torch.minimum(sel, torch.arange(6))                       # causal: position k sees t <= k
    pairs = A.studies.causal_pairs_separable(X, sel)
    assert pairs.tolist() == [A.studies.causal_pairs_separable(X[b], sel[b]) for b in range(30)]
    assert 0 < int(pairs.sum()) < 30


def test_separable_agrees_with_the_v_svm():
    """The NNLS shortcut and the v-SVM it stands for give the same verdict."""
    g = A.set_seed(11)
    for _ in range(40):
        pts = torch.randn(6, 2, generator=g, dtype=torch.float64)
        labels = torch.randint(0, 2, (6,), generator=g).to(torch.float64) * 2 - 1
        try:
            A.maxmargin.v_svm(pts[:, None], labels, torch.zeros(6, dtype=torch.long))
            expect = True
        except A.InfeasibleError:
            expect = False
        assert A.studies.separable_through_origin(pts, labels) == expect


def test_separable_refuses_bad_labels_and_empty_sets():
    with pytest.raises(ValueError, match="-1 or \\+1"):
        A.studies.separable_through_origin([[1.0, 0.0]], [0.5])
    with pytest.raises(ValueError, match="m >= 1"):
        A.studies.separable_through_origin(torch.zeros(0, 2), torch.zeros(0))
