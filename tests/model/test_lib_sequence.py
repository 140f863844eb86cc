"""Token masks and sequence (every position a query) / causal attention (paper A's sequence
extension)."""

import pytest
import torch

import attnsvm as A

F64 = torch.float64


def _sequence(seed=0, n=2, T=4, d=5, causal=True):
    g = A.set_seed(seed)
    X = torch.randn(n, T, d, generator=g, dtype=F64)
    X = X / X.norm(dim=-1, keepdim=True)
    Y = torch.randint(0, 2, (n, T), generator=g).to(F64) * 2 - 1
    v = torch.randn(d, generator=g, dtype=F64)
    return X, Y, v / v.norm(), A.Problem.sequence(X, Y, v / v.norm(), causal=causal)


def test_sequence_problem_layout():
    X, Y, v, P = _sequence()
    assert (P.n, P.T, P.d) == (8, 4, 5)
    for i in range(2):
        for k in range(4):
            j = i * 4 + k
            assert torch.equal(P.X[j], X[i]) and torch.equal(P.Z[j], X[i, k]) and P.Y[j] == Y[i, k]
            assert P.mask[j].tolist() == [t <= k for t in range(4)]
    assert A.Problem.sequence(X, Y, v).mask is None


def test_causal_mask_is_exact_and_future_tokens_do_not_matter():
    X, Y, v, P = _sequence(1)
    W = 50 * torch.randn(5, 5, generator=A.set_seed(2), dtype=F64)
    probs = A.WAttention(W).probabilities(P)
    assert bool((probs[~P.mask] == 0).all()) and torch.allclose(probs.sum(-1), torch.ones(8, dtype=F64))
    X2 = X.clone()
    X2[:, -1] = -X2[:, -1]                              # change the last token of every sequence
    P2 = A.Problem.sequence(X2, Y, v, causal=True)
    out, out2 = A.predict(A.WAttention(W), P), A.predict(A.WAttention(W), P2)
    earlier = torch.tensor([k < 3 for _ in range(2) for k in range(4)])
    assert torch.equal(out[earlier], out2[earlier]) and not torch.equal(out, out2)


def test_opt_and_optimal_risk_ignore_masked_tokens():
    X, Y, v, P = _sequence(3)
    scores = P.scores.masked_fill(~P.mask, -torch.inf)
    assert torch.equal(P.opt, scores.argmax(-1))
    assert bool((P.opt <= torch.arange(4).repeat(2)).all())          # causal: opt_ik <= k
    first = torch.arange(0, 8, 4)
    assert bool((P.opt[first] == 0).all()) and bool(torch.isinf(P.score_gap()[first]).all())
    expected = A.model.heads.LOSSES["logistic"](scores.max(-1).values).mean()
    assert torch.allclose(A.model.optimal_risk(P), expected)


@pytest.mark.parametrize("causal", [False, True])
def test_masked_gradients_match_autograd(causal):
    *_, P = _sequence(4, causal=causal)
    W0 = 3 * torch.randn(5, 5, generator=A.set_seed(5), dtype=F64)
    model = A.WAttention(W0)
    (auto,) = torch.autograd.grad(A.empirical_risk(model, P).sum(), model.W)
    closed = A.model.gradients.risk_and_gradients(A.WAttention(W0), P).grads[0]
    assert torch.allclose(auto, closed, rtol=1e-10, atol=1e-13)
    K = torch.randn(5, 3, generator=A.set_seed(6), dtype=F64)
    Q = torch.randn(5, 3, generator=A.set_seed(7), dtype=F64)
    kq = A.KQAttention(K, Q)
    auto = torch.autograd.grad(A.empirical_risk(kq, P).sum(), kq.params)
    closed = A.model.gradients.risk_and_gradients(A.KQAttention(K, Q), P).grads
    assert all(torch.allclose(a, c, rtol=1e-10, atol=1e-13) for a, c in zip(auto, closed))


def test_causal_svm_constrains_only_visible_tokens():
    X, Y, v, P = _sequence(8, n=2, T=3, d=6)
    result = A.att_svm(P.X, P.Z, P.opt, mask=P.mask)
    hidden = ~P.mask
    assert bool(torch.isinf(result.margins[hidden]).all())
    visible = P.mask.clone()
    visible[torch.arange(6), P.opt] = False
    assert bool((result.margins[visible] >= 1 - 1e-7).all()) and bool(result.support[visible].any())
    logits = torch.einsum("ntd,de,ne->nt", P.X, result.W, P.Z)
    assert bool((logits.gather(1, P.opt[:, None]) - logits >= 1 - 1e-7)[visible].all())
    # first positions see one token: no constraint at all
    assert bool(torch.isinf(result.margins[torch.arange(0, 6, 3)]).all())
    # the SVM of the problem restricted to one query position k is att_svm with z_i = x_ik
    k = 2
    rows = torch.arange(k, 6, 3)
    alone = A.att_svm(P.X[rows], P.Z[rows], P.opt[rows], mask=P.mask[rows])
    direct = A.att_svm(X[:, :k + 1], X[:, k], P.opt[rows])
    assert torch.allclose(alone.W, direct.W, atol=1e-9)


def test_mask_makes_a_duplicate_harmless_and_selection_kind_uses_it():
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]], dtype=F64)   # token 2 repeats token 0
    Z = torch.tensor([[1.0, 0.0]], dtype=F64)
    with pytest.raises(A.InfeasibleError, match="appears twice"):
        A.att_svm(X, Z, [0])
    mask = torch.tensor([[True, True, False]])
    result = A.att_svm(X, Z, [0], mask=mask)
    assert torch.isinf(result.margins[0, 2]) and abs(float(result.margins[0, 1]) - 1) < 1e-9
    P = A.Problem(X, torch.ones(1, dtype=F64), Z, torch.tensor([1.0, 0.0], dtype=F64), mask)
    assert A.selection_kind(P, [0])[0] == "global"
    assert set(A.maxmargin.classify_selections(P)) == {(0,), (1,)}
    with pytest.raises(ValueError, match="may not attend"):
        A.att_svm(X, Z, [2], mask=mask)


def test_training_a_causal_sequence_reaches_its_svm():
    *_, P = _sequence(9, n=2, T=3, d=8)
    result = A.att_svm(P.X, P.Z, P.opt, mask=P.mask)
    att = A.WAttention.zeros(8)
    h = A.train(att, P, 3000, 0.1, reference=result.W, log_every=1000)
    alpha, kinds = A.maxmargin.run_outcomes(A.Problem.stack([P]), att.probabilities(P)[None])
    assert kinds == ["global"] and float(h.corr[-1]) > 0.9999


def test_bad_masks_are_refused():
    X, Y, v, P = _sequence()
    for mask, error in ((P.mask.int(), TypeError), ("m", TypeError), (P.mask[:3], ValueError),
                        (torch.zeros(8, 4, dtype=torch.bool), ValueError),
                        (P.mask[None].expand(2, 8, 4), ValueError)):
        with pytest.raises(error):
            A.Problem(P.X, P.Y, P.Z, P.v, mask)
    with pytest.raises(ValueError, match="one label per position"):
        A.Problem.sequence(X, Y[:, :2], v)
    with pytest.raises(ValueError, match="mask must be a boolean tensor"):
        A.att_svm(P.X, P.Z, P.opt, mask=torch.ones(3, 3, dtype=torch.bool))


def test_masks_survive_trial_stack_and_to():
    *_, P = _sequence()
    B = A.Problem.stack([P, P])
    assert B.mask.shape == (2, 8, 4) and torch.equal(B.trial(1).mask, P.mask)
    assert torch.equal(P.to(dtype=torch.float32).mask, P.mask)
    assert torch.equal(P.with_queries(P.Z * 2).mask, P.mask)


def test_select_and_svm_stack():
    P = A.random_problem(2, 3, 4, trials=5, generator=A.set_seed(70))
    first = P.select(slice(3))
    assert first.batch_shape == (3,) and torch.equal(first.X, P.X[:3]) and torch.equal(first.v, P.v[:3])
    picked = P.select(torch.tensor([4, 0]))
    assert torch.equal(picked.Z, P.Z[[4, 0]])
    W = A.maxmargin.svm_stack(first, first.opt)
    for b in range(3):
        assert torch.allclose(W[b], A.att_svm(P.X[b], P.Z[b], P.opt[b]).W)
    *_, S = _sequence(12, n=2, T=3, d=6)
    B = A.Problem.stack([S, S])
    assert torch.equal(B.select([1]).mask, B.mask[[1]])
    Wb = A.maxmargin.svm_stack(B, B.opt)
    assert torch.allclose(Wb[0], A.att_svm(S.X, S.Z, S.opt, mask=S.mask).W)
    for bad, error in ((5, TypeError), (slice(10, 20), ValueError), (torch.tensor([7]), ValueError)):
        with pytest.raises(error):
            P.select(bad)
    with pytest.raises(ValueError, match="alpha must have shape"):
        A.maxmargin.svm_stack(first, P.opt)
