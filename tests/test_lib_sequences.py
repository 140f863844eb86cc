"""Sequence self-attention machinery of chapter 8 (attnsvm.sequences)."""

import itertools
import math

import pytest
import torch

import attnsvm as A


def test_random_sequences_shapes_units_and_prefix():
    X, Y, v = A.random_sequences(2, 4, 3, 5, A.set_seed(0))
    assert X.shape == (5, 2, 4, 3) and Y.shape == (5, 2, 4) and v.shape == (5, 3)
    assert torch.allclose(X.norm(dim=-1), torch.ones(5, 2, 4, dtype=torch.float64))
    assert set(Y.unique().tolist()) <= {-1.0, 1.0}
    Xk, Yk, vk = A.random_sequences(2, 4, 3, 5, A.set_seed(0), keep=2)
    assert torch.equal(Xk, X[:2]) and torch.equal(Yk, Y[:2]) and torch.equal(vk, v[:2])


def test_reference_matches_the_flattened_problem_and_masks_exactly():
    X, Y, v = (t[0] for t in A.random_sequences(2, 5, 4, 1, A.set_seed(1)))
    W = 30 * torch.randn(4, 4, generator=A.set_seed(2), dtype=torch.float64)
    for causal in (False, True):
        P = A.Problem.sequence(X, Y, v, causal=causal)
        f, risk, s = A.self_attention_reference(W, X, Y, v, causal)
        att = A.WAttention(W)
        assert torch.allclose(A.predict(att, P).reshape(2, 5), f, atol=1e-12)
        assert float((A.empirical_risk(att, P).detach() - risk).abs()) < 1e-12
        if causal:
            assert float(s[:, ~torch.ones(5, 5, dtype=torch.bool).tril()].abs().max()) == 0.0
            assert torch.allclose(s[:, 0, 0], torch.ones(2, dtype=torch.float64))


def test_cover_fraction_against_brute_force_and_closed_forms():
    pts = torch.randn(6, 3, generator=A.set_seed(3), dtype=torch.float64)
    count = sum(A.separable_through_origin(pts, torch.tensor(y, dtype=torch.float64))
                for y in itertools.product((-1.0, 1.0), repeat=6))
    assert count == round(A.cover_fraction(6, 3) * 2 ** 6) == 2 * (1 + 5 + 10)
    assert A.cover_fraction(4, 4) == 1.0 and A.cover_fraction(8, 4) == 0.5
    assert A.cover_fraction(3, 1) == pytest.approx(2 / 8)


def test_separable_hard_case_small_margin():
    pts = torch.tensor([[1.0, 1e-6], [1.0, -1e-6]], dtype=torch.float64)
    assert A.separable_through_origin(pts, torch.tensor([1.0, -1.0], dtype=torch.float64))
    # a positive point strictly inside the cone of two negative ones: not separable
    pts = torch.tensor([[1.0, 0.1], [1.0, -0.1], [1.0, 0.0]], dtype=torch.float64)
    assert not A.separable_through_origin(pts, torch.tensor([-1.0, -1.0, 1.0], dtype=torch.float64))
    # x and -x with the same label can never be separated
    pts = torch.tensor([[1.0, 2.0], [-1.0, -2.0]], dtype=torch.float64)
    assert not A.separable_through_origin(pts, torch.tensor([1.0, 1.0], dtype=torch.float64))


def test_causal_pairs_condition_by_hand():
    """Sequence of 3 tokens in d = 1: positions 1 and 2 see tokens 0 and 1; selecting 0 at one and 1
    at the other needs their queries x_1, x_2 separable through the origin (opposite signs)."""
    X = torch.tensor([[[1.0], [1.0], [-1.0]]], dtype=torch.float64)
    assert A.causal_pairs_separable(X, torch.tensor([[0, 0, 1]]))        # x_1 = 1, x_2 = -1: fine
    X_same = torch.tensor([[[1.0], [1.0], [2.0]]], dtype=torch.float64)
    assert not A.causal_pairs_separable(X_same, torch.tensor([[0, 0, 1]]))   # same sign: blocked
    assert A.causal_pairs_separable(X_same, torch.tensor([[0, 1, 1]]))


def test_smallest_logit_gaps_ignores_masked_tokens():
    X, Y, v = A.random_sequences(1, 3, 3, 2, A.set_seed(4))
    P = A.Problem.sequence(X, Y, v, causal=True)
    W = torch.randn(2, 3, 3, generator=A.set_seed(5), dtype=torch.float64)
    gaps = A.smallest_logit_gaps(W, P)
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
    X, Y, v = A.random_sequences(2, 4, 8, 3, A.set_seed(6))
    P = A.Problem.sequence(X, Y, v, causal=True)
    W, iterates, stop = A.ngd_until_gap(P, 600, 0.5, 50.0, 100)
    assert iterates.shape == (7, 3, 8, 8) and bool((stop <= 600).all())
    gaps = A.smallest_logit_gaps(W, P)
    assert bool((gaps[stop < 600] > 50).all())
    for b in range(3):                                     # frozen after its stop
        k = int(stop[b]) // 100
        assert torch.equal(iterates[k:, b], iterates[k, b].expand_as(iterates[k:, b]))
    att = A.WAttention.zeros(8, 3)
    A.train(att, P, 100, 0.5, "ngd", log_every=100)
    assert torch.allclose(att.W.detach(), iterates[1], atol=1e-12)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="keep"):
        A.random_sequences(1, 2, 2, 3, A.set_seed(0), keep=4)
    with pytest.raises(ValueError, match="multiple"):
        X, Y, v = A.random_sequences(1, 2, 2, 1, A.set_seed(0))
        A.ngd_until_gap(A.Problem.sequence(X, Y, v), 10, 0.5, 10.0, 3)
    with pytest.raises(ValueError, match="700"):
        A.ngd_until_gap(A.Problem.sequence(X, Y, v), 10, 0.5, 800.0, 5)
