"""SVMCache (each Att-SVM solved once, keyed by the data) and probability_off (mass off a selection)."""

import pytest
import torch

import attnsvm as A


def test_cache_solves_once_and_matches_att_svm():
    P = A.random_problem(3, 4, 5, trials=3, generator=A.set_seed(11))
    cache = A.maxmargin.SVMCache()
    first = cache.stack(P, P.opt, "fro")
    again = cache.stack(P, P.opt, "fro")
    assert len(cache.seconds["fro"]) == 3                    # the second stack solved nothing
    assert torch.equal(first, again)
    for b in range(3):
        assert torch.allclose(first[b], A.att_svm(P.X[b], P.Z[b], P.opt[b]).W)
    nuc = cache.solve(P.trial(0), P.opt[0], "nuc")
    assert len(cache.seconds["nuc"]) == 1
    assert torch.allclose(nuc.W, A.att_svm(P.X[0], P.Z[0], P.opt[0], "nuc").W, atol=1e-6)
    assert torch.equal(A.maxmargin.svm_stack(P, P.opt), first)


def test_cache_keys_on_the_data_not_on_the_position():
    P = A.random_problem(2, 3, 4, trials=2, generator=A.set_seed(12))
    cache = A.maxmargin.SVMCache()
    alpha = P.opt[0]
    one = cache.solve(P.trial(0), alpha)
    moved = P.trial(0)
    moved.X[0, 0] += 0.5                                     # same shapes and selection, new data
    other = cache.solve(moved, alpha)
    assert len(cache.seconds["fro"]) == 2
    assert not torch.allclose(one.W, other.W)


def test_cache_refuses_bad_input_and_names_the_infeasible_trial():
    P = A.random_problem(2, 3, 4, trials=2, generator=A.set_seed(13))
    cache = A.maxmargin.SVMCache()
    with pytest.raises(ValueError, match="one instance"):
        cache.solve(P, P.opt)
    with pytest.raises(ValueError, match="one trials dimension"):
        cache.stack(P.trial(0), P.opt[0])
    with pytest.raises(TypeError):
        cache.solve(P.X, P.opt)
    X = P.X.clone()
    chosen = int(P.opt[1, 0])
    X[1, 0, 1 - min(chosen, 1)] = X[1, 0, chosen]            # trial 1: the selected token twice
    dup = A.Problem(X, P.Y, P.Z, P.v)
    with pytest.raises(A.InfeasibleError, match="trial 1"):
        cache.stack(dup, P.opt)


def test_probability_off_is_accurate_where_one_minus_s_cancels():
    logits = torch.tensor([[0.0, -50.0, -60.0], [0.0, 0.0, -1.0]], dtype=torch.float64)
    probs = torch.softmax(logits, -1)
    alpha = torch.tensor([0, 1])
    off = A.model.probability_off(probs, alpha)
    assert float(1 - probs[0, 0]) == 0.0                     # the textbook difference has cancelled
    assert off[0] == pytest.approx(float(torch.exp(torch.tensor(-50.0)) + torch.exp(torch.tensor(-60.0))),
                                   rel=1e-12)
    assert off[1] == pytest.approx(float(1 - probs[1, 1]), rel=1e-12)
    assert torch.allclose(off + A.model.probability_on(probs, alpha), torch.ones(2, dtype=torch.float64))
