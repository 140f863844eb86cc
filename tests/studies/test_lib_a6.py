"""The A6 study (attnsvm.studies.a6) against independent computations: the driver's counts and curves are
recomputed from scratch on a small study, the helpers on hand-made instances."""

import math

import pytest
import torch

import attnsvm as A

F64 = torch.float64


@pytest.fixture(scope="module")
def small():
    return A.studies.a6_study(4, 12, A.set_seed(604), steps=400, every=100)


def test_counts_add_up_and_intervals_are_wilson(small):
    c = small.counts
    assert c["skipped"] + c["trained"] == c["drawn"]
    assert c["ambiguous"] + c["nothing_masked"] + c["clear"] == c["trained"]
    assert c["clear"] == c["accepted"] + c["failed"] and c["accepted"] >= 12
    rate, low, high = small.rate
    assert rate == c["accepted"] / c["trained"] and (low, high) == A.book.proportion_interval(c["accepted"], c["trained"])
    assert low < rate < high
    assert small.rate_drawn[0] == c["accepted"] / c["drawn"]


def test_study_recomputed_independently(small):
    """Redo the first batch by hand: same draw, training, filter, solves and curves."""
    c = small.counts
    X, Y, Z, V, W0 = A.studies.a6_draw(c["drawn"], 4, A.set_seed(604))        # one batch: 12 / 0.2 * 1.05 + 100
    keep = (Y < 0).any(-1)
    assert int(keep.sum()) == c["trained"]
    X, Y, Z, V, W0 = X[keep], Y[keep], Z[keep], V[keep], W0[keep]
    beta = A.studies.ngd_relu_head(X, Y, Z, V, W0, steps=400, lr=0.1, eps=2.220446049250313e-16, every=100)
    W = A.studies.span_iterates(beta, X, Z, W0)                                   # (5, B, d, d)
    s = torch.softmax(torch.einsum("bntd,bde,bne->bnt", X, W[-1], Z), -1)
    ambiguous = ((s > 1e-6) & (s < 1e-3)).flatten(1).any(1)
    nothing = ~(s <= 1e-6).flatten(1).any(1)
    clear = ~ambiguous & ~nothing
    assert int(ambiguous.sum()) == c["ambiguous"] and int(clear.sum()) == c["clear"]
    first = torch.nonzero(clear).flatten()[:len(small.kind)].tolist()
    for j, b in enumerate(first[:5]):
        sets = s[b] >= 1e-3
        one = A.att_svm(X[b], Z[b], s[b].argmax(-1)).W
        direction = A.gen_svm(X[b], Z[b], sets).W
        ref_one = 1 - A.corr(W[:, b], one, 1)
        ref_dir = 1 - A.corr(W[:, b], direction, 1)
        assert torch.allclose(small.curves["one"][j], ref_one, atol=1e-12)
        assert torch.allclose(small.curves["dir"][j], ref_dir, atol=1e-12)
        kind = 2 if bool(sets.all(-1).any()) else 0 if bool((sets.sum(-1) == 1).all()) else 1
        assert int(small.kind[j]) == kind
        assert math.isclose(float(small.late_move[j]), float((W[-1, b] - W[-2, b]).norm()), rel_tol=1e-12)
    # the SVM-eq fit is a projection onto a space containing W_dir: never worse than the direction
    assert bool((small.curves["eq"][:, -1] <= small.curves["dir"][:, -1] + 1e-10).all())
    assert small.curves["eq"].shape == (len(small.kind), 5) and small.steps.tolist() == [0, 100, 200, 300, 400]


def test_runs_are_named_and_unpack_like_a_tuple(small):
    runs = small.runs
    assert isinstance(runs, A.studies.A6Runs) and runs._fields == (
        "X", "Y", "Z", "V", "W_last", "W_dir", "sets")
    X, Y, Z, V, W_last, W_dir, sets = runs
    B = small.kind.shape[0]
    assert X is runs.X and sets is runs.sets and X.shape[0] == B == W_dir.shape[0]
    n, T, d = X.shape[1:]
    assert Y.shape == (B, n) and Z.shape == (B, n, d) and V.shape == (B, d, d)
    assert W_last.shape == (B, d, d) and sets.shape == (B, n, T) and sets.dtype == torch.bool


def test_study_is_deterministic():
    a = A.studies.a6_study(4, 3, A.set_seed(7), steps=200, every=100)
    b = A.studies.a6_study(4, 3, A.set_seed(7), steps=200, every=100)
    assert a.counts == b.counts and torch.equal(a.curves["eq"], b.curves["eq"])


def test_attention_probabilities_against_a_loop():
    X, Y, Z, V, W0 = A.studies.a6_draw(3, 5, A.set_seed(1))
    s = A.studies.attention_probabilities(W0, X, Z)
    for b in range(3):
        for i in range(3):
            logits = X[b, i] @ W0[b] @ Z[b, i]
            assert torch.allclose(s[b, i], torch.softmax(logits, -1), atol=1e-15)
    # a large logit gap saturates without NaN
    big = A.studies.attention_probabilities(1e5 * W0, X, Z)
    assert bool(torch.isfinite(big).all()) and torch.allclose(big.sum(-1), torch.ones(3, 3, dtype=F64))


def test_violation_by_hand():
    X = torch.eye(3, dtype=F64)[None]
    Z = torch.tensor([[1.0, 0.0, 0.0]], dtype=F64)
    sets = torch.tensor([[True, True, False]])
    u = torch.tensor([1 / 3, 1 / 3, -2 / 3], dtype=F64)                   # the Gen-SVM solution
    assert A.studies.gen_svm_violation(torch.outer(u, Z[0]), X, Z, sets) < 1e-15
    u_bad = torch.tensor([0.5, 0.3, -0.2], dtype=F64)                      # spread 0.2, margin 0.5
    assert math.isclose(A.studies.gen_svm_violation(torch.outer(u_bad, Z[0]), X, Z, sets), 0.5, rel_tol=1e-12)
    u_near = torch.tensor([0.4, 0.4 - 1e-9, -0.6], dtype=F64)              # a hair inside: tiny spread
    assert math.isclose(A.studies.gen_svm_violation(torch.outer(u_near, Z[0]), X, Z, sets), 1e-9, rel_tol=1e-5)
    full = torch.ones(1, 3, dtype=torch.bool)                               # equalities only
    assert math.isclose(A.studies.gen_svm_violation(torch.outer(u_bad, Z[0]), X, Z, full), 0.7, rel_tol=1e-12)


def test_batch_mismatch_is_refused_by_the_library_whatever_einsum_raises(monkeypatch):
    """With opt_einsum installed, torch.einsum raised opt_einsum's own ValueError for a batch
    mismatch; the batch shapes are now checked before einsum is called."""
    X, Y, Z, V, W0 = A.studies.a6_draw(2, 3, A.set_seed(5))

    def foreign_einsum(*args, **kwargs):
        raise ValueError("Size of label 'f' for operand 1 (2) does not match previous terms (3).")

    monkeypatch.setattr(torch, "einsum", foreign_einsum)
    with pytest.raises(ValueError, match="batch dimensions of W"):
        A.studies.attention_probabilities(W0[:1].expand(3, 3, 3), X, Z)


def test_bad_input():
    X, Y, Z, V, W0 = A.studies.a6_draw(2, 3, A.set_seed(2))
    with pytest.raises(ValueError, match="shapes do not match"):
        A.studies.attention_probabilities(W0[:, :2], X, Z)
    with pytest.raises(ValueError, match="every set"):
        A.studies.gen_svm_violation(W0[0], X[0], Z[0], torch.zeros(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="multiple"):
        A.studies.a6_study(4, 1, A.set_seed(0), steps=150, every=100)
    with pytest.raises(ValueError, match="masked < keep"):
        A.studies.a6_study(4, 1, A.set_seed(0), keep=1e-7)
    with pytest.raises(ValueError):
        A.studies.a6_study(0, 1, A.set_seed(0))
    with pytest.raises(ValueError, match="far below"):
        A.studies.a6_study(4, 1, A.set_seed(0), steps=1, every=1, plan=1.0)      # one step accepts nothing
