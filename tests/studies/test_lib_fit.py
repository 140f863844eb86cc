"""attnsvm.studies.fit: logit gaps, smallest margins, the gap-stopped training of chapter 9, the recorded
training of chapter 10 and the norm-SVM cache, checked against independent computations."""

import math

import torch

import attnsvm as A

F64 = torch.float64


def test_logit_gaps_by_hand():
    logits = torch.tensor([[[1.0, 3.0, 0.0], [2.0, 2.0, -1.0]]], dtype=F64)
    gaps = A.studies.logit_gaps(logits, torch.tensor([[1, 0]]))
    assert gaps.tolist() == [[[2.0, math.inf, 3.0], [math.inf, 0.0, 3.0]]]


def test_smallest_margin_of_the_svm_is_one():
    P = A.random_problem(3, 4, 5, trials=2, generator=A.set_seed(0))
    W = torch.stack([A.att_svm(P.trial(b).X, P.trial(b).Z, P.opt[b]).W for b in range(2)])
    m = A.studies.smallest_margin(W, P, P.opt)
    assert torch.allclose(m, torch.ones(2, dtype=F64), atol=1e-6)
    assert torch.allclose(A.studies.smallest_margin(3 * W, P, P.opt), 3 * m)
    # an independent loop over examples and tokens
    b, best = 1, math.inf
    for i in range(3):
        a = int(P.opt[b, i])
        for t in range(4):
            if t != a:
                best = min(best, float((P.X[b, i, a] - P.X[b, i, t]) @ W[b] @ P.Z[b, i]))
    assert abs(best - float(m[b])) < 1e-12


def test_train_until_gap_equals_train_while_no_run_stops():
    P = A.random_problem(3, 4, 5, trials=3, generator=A.set_seed(1))
    att, stop, turn, gap = A.studies.train_until_gap(A.WAttention, [torch.zeros(3, 5, 5, dtype=F64)], P, "ngd", 0.1, 500,
                                             chunk=100, gap_stop=1e9)
    ref = A.WAttention.zeros(5, trials=3)
    A.train(ref, P, 500, 0.1, "ngd")
    assert torch.allclose(att.combined(), ref.combined(), atol=1e-10)
    assert stop.tolist() == [500] * 3 and bool(torch.isfinite(turn).all())
    lg = ref.logits(P).detach()                     # the returned gaps: an independent loop
    for b in range(3):
        by_hand = min(float(lg[b, i].max() - lg[b, i, t]) for i in range(3) for t in range(4)
                      if t != int(lg[b, i].argmax()))
        assert abs(by_hand - float(gap[b])) < 1e-9


def test_train_until_gap_stops_each_run_past_the_gap():
    P = A.random_problem(2, 3, 6, trials=4, generator=A.set_seed(2))
    att, stop, _, gap = A.studies.train_until_gap(A.WAttention, [torch.zeros(4, 6, 6, dtype=F64)], P, "ngd", 0.5, 3000,
                                          chunk=50, gap_stop=30.0)
    logits = att.logits(P).detach()
    gaps = A.studies.logit_gaps(logits, logits.argmax(-1)).flatten(1).min(1).values
    stopped = stop < 3000
    assert bool(stopped.any()) and bool((gaps[stopped] > 30).all())
    assert torch.allclose(gap, gaps)
    assert bool((stop % 50 == 0).all())
    # the run stopped at the first chunk end past the gap: 50 steps fewer it was below
    b = int(stopped.nonzero()[0])
    ref = A.WAttention.zeros(6, trials=1)
    A.train(ref, P.select([b]), int(stop[b]) - 50, 0.5, "ngd")
    lg = ref.logits(P.select([b])).detach()
    assert float(A.studies.logit_gaps(lg, lg.argmax(-1)).min()) <= 30


def test_train_until_gap_overshoots_by_at_most_one_chunk():
    """A finer chunk stops a fast run closer to the threshold: the overshoot is what one chunk adds."""
    P = A.random_problem(6, 8, 10, trials=6, generator=A.set_seed(9))
    zeros = torch.zeros(6, 10, 10, dtype=F64)
    coarse = A.studies.train_until_gap(A.WAttention, [zeros], P, "mirror", 0.5, 4000, chunk=250, gap_stop=100.0, p=1.75)
    fine = A.studies.train_until_gap(A.WAttention, [zeros], P, "mirror", 0.5, 4000, chunk=25, gap_stop=100.0, p=1.75)
    stopped = (coarse[1] < 4000) & (fine[1] < 4000)
    assert bool(stopped.all())
    assert bool((fine[3] > 100).all()) and bool((fine[3] <= coarse[3] + 1e-9).all())
    assert float(coarse[3].max()) > float(fine[3].max())   # the coarse test overshoots further
    # one chunk before its stop, each fine run was still below the threshold
    for b in range(6):
        ref = A.WAttention.zeros(10, trials=1)
        A.train(ref, P.select([b]), int(fine[1][b]) - 25, 0.5, "mirror", p=1.75)
        lg = ref.logits(P.select([b])).detach()
        assert float(A.studies.logit_gaps(lg, lg.argmax(-1)).min()) <= 100


def test_attention_entropy_limits():
    T = 5
    assert torch.allclose(A.studies.attention_entropy(torch.full((2, T), 1 / T, dtype=F64)), torch.ones(2, dtype=F64))
    assert float(A.studies.attention_entropy(torch.tensor([1.0, 0, 0, 0], dtype=F64))) == 0.0
    s = torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=F64)
    assert abs(float(A.studies.attention_entropy(s)) - 0.5) < 1e-12        # log 2 / log 4


def test_accuracy_against_predict():
    P = A.random_problem(20, 4, 5, generator=A.set_seed(3))
    att = A.WAttention(torch.randn(5, 5, dtype=F64, generator=A.set_seed(4)))
    by_hand = sum(float(torch.sign(A.predict(att, P).detach()[i])) == float(P.Y[i]) for i in range(20)) / 20
    assert A.studies.accuracy(att, P) == by_hand


def test_train_recorded_records_the_run():
    P = A.random_problem(6, 4, 5, generator=A.set_seed(5))
    test = A.random_problem(4, 4, 5, generator=A.set_seed(6))
    att = A.WAttention.zeros(5)
    head = A.LinearHead(torch.zeros(5, dtype=F64))
    history, curves, seconds = A.studies.train_recorded(att, A.Problem(P.X, P.Y, P.Z, torch.zeros(5, dtype=F64)),
                                                40, test=test, head=head, log_every=10)
    assert list(curves["step"]) == [0, 10, 20, 30, 40] and len(curves["norm"]) == 5 and seconds > 0
    assert curves["entropy"][0] == 1.0 and curves["v_norm"][0] == 0.0
    v = head.params[0].detach()
    assert abs(curves["v_norm"][-1] - float(v.norm())) < 1e-12
    assert curves["test"][-1] == A.studies.accuracy(att, A.Problem(test.X, test.Y, test.Z, v))
    fixed = A.studies.train_recorded(A.WAttention.zeros(5), P, 5)[1]
    assert math.isnan(fixed["test"][0]) and fixed["v_norm"][0] == float(P.v.norm())


def test_norm_svm_cache_solves_once():
    P = A.random_problem(2, 3, 4, trials=2, generator=A.set_seed(7))
    cache = A.studies.NormSVMCache()
    first = cache.solve(P, 1, P.opt[1], 3)
    assert cache.solve(P, 1, P.opt[1].tolist(), 3) is first and len(cache.seconds) == 1
    ref = A.norm_svm(P.trial(1).X, P.trial(1).Z, P.opt[1], 3)
    assert torch.allclose(first.W, ref.W)
    assert cache.solve(P, 0, P.opt[0], 3) is not first and len(cache.seconds) == 2


def test_margin_ratio_is_one_at_the_svm_and_below_elsewhere():
    P = A.random_problem(2, 3, 4, trials=3, generator=A.set_seed(8))
    cache = A.studies.NormSVMCache()
    W_svm = torch.stack([cache.solve(P, b, P.opt[b], 3).W for b in range(3)])
    rho = A.studies.margin_ratio(5 * W_svm, P, P.opt, 3, cache)
    assert torch.allclose(rho, torch.ones(3, dtype=F64), atol=1e-6)
    # an independent value: the Frobenius SVM measured in the l3 norm is below 1
    W_fro = torch.stack([A.att_svm(P.trial(b).X, P.trial(b).Z, P.opt[b]).W for b in range(3)])
    rho_fro = A.studies.margin_ratio(W_fro, P, P.opt, 3, cache)
    by_hand = [float(1 / torch.linalg.vector_norm(W_fro[b].flatten(), ord=3))
               * float(torch.linalg.vector_norm(W_svm[b].flatten(), ord=3)) for b in range(3)]
    assert torch.allclose(rho_fro, torch.tensor(by_hand, dtype=F64), atol=1e-5)
    assert bool((rho_fro < 1 - 1e-4).all())
    part = A.studies.margin_ratio(W_fro, P, P.opt, 3, cache, where=torch.tensor([True, False, True]))
    assert math.isnan(float(part[1])) and float(part[0]) == float(rho_fro[0])


def test_smallest_top_gaps_ignores_masked_competitors():
    """One gap rule for train_until_gap and sequences.smallest_logit_gaps: -inf (masked) logits and
    rows with nothing else visible do not count."""
    import math
    from attnsvm.studies.fit import smallest_top_gaps
    ninf = -math.inf
    logits = torch.tensor([[[3.0, 1.0, ninf], [ninf, 2.0, ninf]],          # trial 0: gaps 2; row alone
                           [[0.5, 0.0, 4.0], [ninf, ninf, ninf]]], dtype=torch.float64)
    assert smallest_top_gaps(logits).tolist() == [2.0, 3.5]
    assert smallest_top_gaps(logits[:, 1:]).tolist() == [math.inf, math.inf]
