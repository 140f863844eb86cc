"""reached_svm (attnsvm.maxmargin.reached): which selection, kind and SVM a trained attention
reached, checked against the definitions, and its warnings outside the results' hypotheses."""

import warnings

import pytest
import torch

import attnsvm as A


def test_a_run_on_its_svm_direction_is_read_back():
    P = A.random_problem(4, 5, 6, generator=A.set_seed(3))
    alpha = P.opt.clone()
    svm = A.att_svm(P, alpha)
    reached = A.reached_svm(A.WAttention(torch.as_tensor(svm.W) * 50), P)
    assert reached.selection.tolist() == alpha.tolist() and reached.kind == "global"
    assert abs(reached.corr - 1) < 1e-12 and reached.saturated and reached.svm.objective == svm.objective


def test_a_batched_run_answers_per_trial_as_one_run_each():
    B = A.random_problem(3, 4, 5, trials=4, generator=A.set_seed(4))
    W = A.WAttention(torch.randn(4, 5, 5, generator=A.set_seed(5), dtype=torch.float64) * 3)
    batched = A.reached_svm(W, B)
    alone = [A.reached_svm(A.WAttention(W.W[b]), B.trial(b)) for b in range(4)]
    assert [(r.kind, r.selection.tolist(), r.saturated) for r in batched] == \
        [(r.kind, r.selection.tolist(), r.saturated) for r in alone]
    assert all(r.corr == s.corr or (r.corr != r.corr and s.corr != s.corr) for r, s in zip(batched, alone))


def test_kq_uses_the_nuclear_svm_and_warns_when_too_narrow():
    P = A.random_problem(6, 8, 10, generator=A.set_seed(1))
    KQ = A.KQAttention.init(10, m=2, generator=A.set_seed(2))
    A.train(KQ, P, steps=300)
    with pytest.warns(A.maxmargin.ReachedWarning, match="width m = 2"):
        reached = A.reached_svm(KQ, P)
    assert reached.svm.norm == "nuc" and reached.svm.rank > 2


def test_tied_optimal_tokens_are_flagged():
    P = A.random_problem(3, 4, 5, generator=A.set_seed(6))
    X = P.X.clone()
    for i, t in enumerate(P.opt.tolist()):                     # a second optimal token per example:
        other = (t + 1) % 4                                    # the optimal one moved along v^perp
        u = torch.randn(5, generator=A.set_seed(7 + i), dtype=torch.float64)
        u -= (u @ P.v) / (P.v @ P.v) * P.v
        X[i, other] = X[i, t] + u
    Q = A.Problem(X, P.Y, P.Z, P.v)
    assert float(Q.scores.topk(2).values.diff().abs().max()) < 1e-12
    with pytest.warns(A.maxmargin.ReachedWarning, match="tied optimal tokens"):
        A.reached_svm(A.WAttention(torch.eye(5, dtype=torch.float64)), Q)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        A.reached_svm(A.WAttention(torch.eye(5, dtype=torch.float64)), P)      # untied: silent
