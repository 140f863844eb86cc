"""Next-token prediction with a linear decoder (attnsvm.maxmargin.next_token; book page ch08b)."""

import math

import pytest
import torch

import attnsvm as A
from attnsvm.maxmargin.next_token import (ntp_data, ntp_finite_part, ntp_gradient_descent, ntp_loss,
                                ntp_project, ntp_svm)


def _instance(seed=0, m=3, d=3, V=6, supports=((0, 1, 2), (2, 3), (1, 4, 5))):
    g = A.set_seed(seed)
    H = torch.randn(m, d, generator=g, dtype=torch.float64)
    H = H / H.norm(dim=1, keepdim=True)                      # unit embeddings: lr 2 is a safe step
    P = torch.zeros(m, V, dtype=torch.float64)
    for j, s in enumerate(supports):
        w = torch.rand(len(s), generator=g, dtype=torch.float64) + 0.2
        P[j, list(s)] = w / w.sum()
    return ntp_data(H, P)


def test_entropy_and_loss_by_hand():
    H = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    P = torch.tensor([[0.25, 0.75, 0.0]], dtype=torch.float64)
    data = ntp_data(H, P)
    assert data.entropy == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), abs=1e-15)
    assert float(ntp_loss(torch.zeros(3, 2, dtype=torch.float64), data)) == pytest.approx(math.log(3))


def test_finite_part_matches_log_odds_and_lies_in_F():
    data = _instance()
    W = ntp_finite_part(data)
    logits = data.H @ W.T
    for j in range(3):
        s = data.support[j].nonzero().flatten()
        diffs = logits[j, s] - logits[j, s[0]]
        assert torch.allclose(diffs, (data.P[j, s] / data.P[j, s[0]]).log(), atol=1e-12)
    inside, outside = ntp_project(W, data)
    assert float(outside.norm()) < 1e-12 and torch.allclose(inside, W, atol=1e-12)


def test_svm_meets_margins_orthogonal_to_F_and_is_least_norm():
    data = _instance()
    W = ntp_svm(data)
    logits = data.H @ W.T
    S = data.support
    for j in range(3):
        assert float(logits[j, S[j]].min() - logits[j, ~S[j]].max()) >= 1 - 1e-9
        assert float(logits[j, S[j]].max() - logits[j, S[j]].min()) < 1e-9       # equal in-support logits
    inside, _ = ntp_project(W, data)
    assert float(inside.norm()) < 1e-10
    # any feasible decoder orthogonal to F is at least as long: scaled perturbations stay feasible or not
    g = A.set_seed(1)
    for _ in range(20):
        _, direction = ntp_project(torch.randn(6, 3, generator=g, dtype=torch.float64), data)
        other = W + 0.05 * direction
        lg = data.H @ other.T
        if all(float(lg[j, S[j]].min() - lg[j, ~S[j]].max()) >= 1 for j in range(3)):
            assert float(other.norm()) >= float(W.norm()) - 1e-12


def test_one_hot_labels_give_the_multiclass_svm():
    """|S_j| = 1: F = {0}, W_star = 0 and W_mm is the multiclass max-margin decoder."""
    H = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    P = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    data = ntp_data(H, P)
    assert float(ntp_finite_part(data).abs().max()) == 0.0
    W = ntp_svm(data)
    # by hand: rows w_0 = (2/3, -1/3), w_1 = (-1/3, 2/3), w_2 = (-1/3, -1/3)
    expected = torch.tensor([[2, -1], [-1, 2], [-1, -1]], dtype=torch.float64) / 3
    assert torch.allclose(W, expected, atol=1e-12)


def test_gradient_descent_reaches_the_three_limits():
    data = _instance()
    hist = ntp_gradient_descent(data, 8000, 2.0)
    W = hist.iterates[-1]
    inside, _ = ntp_project(W, data)
    assert float(hist.loss[-1]) - data.entropy < 2e-3
    assert float((inside - ntp_finite_part(data)).norm()) < 1e-2
    assert float(A.corr(W, ntp_svm(data))) > 0.99
    assert bool((hist.loss.diff() <= 1e-15).all())
    again = ntp_gradient_descent(data, 8000, 2.0)
    assert torch.equal(again.iterates, hist.iterates)


def test_not_separable_and_not_compatible_raise():
    # one context followed by every token: nothing to separate
    data = ntp_data(torch.tensor([[1.0]], dtype=torch.float64), torch.tensor([[0.5, 0.5]], dtype=torch.float64))
    with pytest.raises(ValueError, match="no margin"):
        ntp_svm(data)
    # d = 1, two contexts h and 2h with the same pair of tokens and different log-odds: no W matches
    H = torch.tensor([[1.0], [2.0]], dtype=torch.float64)
    P = torch.tensor([[0.5, 0.5, 0.0], [0.9, 0.1, 0.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="not NTP_H-compatible"):
        ntp_finite_part(ntp_data(H, P))
    # d = 1, contexts h and -h both followed by token 0 only: token 0 cannot beat the others on both
    H = torch.tensor([[1.0], [-1.0]], dtype=torch.float64)
    P = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    with pytest.raises(A.InfeasibleError):
        ntp_svm(ntp_data(H, P))


@pytest.mark.parametrize("H, P, pi, message", [
    (torch.ones(2, 2), torch.tensor([[1.0, 0.0]]), None, "same m"),
    (torch.eye(2), torch.tensor([[0.7, 0.7], [1.0, 0.0]]), None, "probability"),
    (torch.eye(2), torch.tensor([[1.5, -0.5], [1.0, 0.0]]), None, "probability"),
    (torch.ones(2, 2), torch.tensor([[1.0, 0.0], [0.0, 1.0]]), None, "same embedding"),
    (torch.eye(2), torch.tensor([[1.0, 0.0], [0.0, 1.0]]), [0.2, 0.2], "pi"),
    (torch.eye(2), torch.tensor([[1.0, 0.0], [0.0, 1.0]]), [1.5, -0.5], "pi"),
    (torch.tensor([[float("nan"), 0.0], [0.0, 1.0]]), torch.tensor([[1.0, 0.0], [0.0, 1.0]]), None, "NaN|finite|inf"),
])
def test_bad_data_raise(H, P, pi, message):
    with pytest.raises(ValueError, match=message):
        ntp_data(H, P, pi)


def test_bad_gradient_descent_arguments():
    data = _instance()
    with pytest.raises(ValueError):
        ntp_gradient_descent(data, 0, 1.0)
    with pytest.raises(ValueError):
        ntp_gradient_descent(data, 10, -1.0)
    with pytest.raises(ValueError, match="W0"):
        ntp_gradient_descent(data, 10, 1.0, W0=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="W must"):
        ntp_project(torch.zeros(2, 2), data)


def test_functions_refuse_what_is_not_ntp_data():
    H = torch.eye(2, dtype=torch.float64)
    P = torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    W = torch.zeros(3, 2, dtype=torch.float64)
    for call in (lambda: ntp_loss(W, (H, P)), lambda: ntp_finite_part(H), lambda: ntp_svm(None),
                 lambda: ntp_project(W, "data"), lambda: ntp_gradient_descent((H, P), 5, 1.0)):
        with pytest.raises(TypeError, match="NTPData"):
            call()


def test_loss_checks_the_decoder():
    data = ntp_data(torch.eye(2, dtype=torch.float64), torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"\(V, d\)"):
        ntp_loss(torch.zeros(2, 3), data)                        # transposed
    with pytest.raises(ValueError, match="NaN or inf"):
        ntp_loss(torch.tensor([[0.0, 0.0], [0.0, 0.0], [math.inf, 0.0]]), data)
    with pytest.raises(TypeError):
        ntp_loss("W", data)


def test_data_are_float64_and_tiny_distinct_embeddings_are_distinct():
    """float32/integer inputs are read as float64 (the row-sum test is at 1e-12); contexts 1e-300
    apart are distinct (a distance test would underflow to 0 and call them repeated)."""
    data = ntp_data(torch.eye(2, dtype=torch.int64), torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 1.0]]),
                    torch.tensor([0.5, 0.5]))
    assert data.H.dtype == data.P.dtype == data.pi.dtype == torch.float64
    tiny = ntp_data(torch.eye(2, dtype=torch.float64) * 1e-300, data.P)
    assert float(ntp_loss(torch.zeros(3, 2, dtype=torch.float64), tiny)) == pytest.approx(math.log(3), abs=1e-15)
    assert torch.allclose(ntp_finite_part(tiny) * 1e-300, ntp_finite_part(data), rtol=1e-9, atol=0)


def test_gradient_descent_logs_float64_losses_and_checks_log_steps():
    """The logged loss keeps every digit (a float32 log rounds CE - entropy away below ~1e-7)."""
    data = _instance()
    hist = ntp_gradient_descent(data, 3, 1e-300, log_steps=[0, 3])
    assert hist.loss.dtype == torch.float64 and hist.steps.tolist() == [0, 3]
    assert float(hist.loss[0]) == float(ntp_loss(torch.zeros(6, 3, dtype=torch.float64), data))
    for steps, error in (([], ValueError), ([4], ValueError), ([-1], ValueError), ([[0, 1]], ValueError),
                         (3, ValueError), ([1.5], TypeError), ("abc", TypeError)):
        with pytest.raises(error, match="log_steps"):
            ntp_gradient_descent(data, 3, 1.0, log_steps=steps)


def test_gradient_descent_refuses_an_overflowing_step():
    data = ntp_data(torch.eye(2, dtype=torch.float64), torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 1.0]]))
    with pytest.raises(ValueError, match="far too large"):
        ntp_gradient_descent(data, 5, 1e308, torch.full((3, 2), -1.7e308, dtype=torch.float64))


def test_unconstrained_competitor_meets_the_margins_and_is_shorter():
    """orthogonal=False: the same margins without equal in-support logits; never longer than W_mm."""
    data = _instance()
    W_mm, W_unc = ntp_svm(data), ntp_svm(data, orthogonal=False)
    lg = data.H @ W_unc.T
    S = data.support
    for j in range(3):
        assert float(lg[j, S[j]].min() - lg[j, ~S[j]].max()) >= 1 - 1e-9
    assert float(W_unc.norm()) <= float(W_mm.norm()) + 1e-12
    assert float(A.corr(W_mm, W_unc)) < 0.999                 # a different direction on this instance
    with pytest.raises(TypeError):
        ntp_svm(data, orthogonal="no")


def test_batched_descent_equals_separate_runs():
    datasets = [_instance(seed) for seed in range(3)] + [_instance(7, supports=((0,), (3, 5), (1, 2)))]
    batch = A.maxmargin.ntp_gradient_descent_batch(datasets, 300, 2.0, log_steps=[0, 30, 300])
    assert batch.iterates.shape == (3, 4, 6, 3) and batch.loss.shape == (3, 4)
    for b, data in enumerate(datasets):
        one = ntp_gradient_descent(data, 300, 2.0, log_steps=[0, 30, 300])
        assert torch.allclose(batch.iterates[:, b], one.iterates, atol=1e-12, rtol=0)
        assert torch.allclose(batch.loss[:, b], one.loss, atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="same shape"):
        A.maxmargin.ntp_gradient_descent_batch([datasets[0], _instance(0, V=7)], 5, 1.0, [5])
    with pytest.raises(ValueError, match="nonempty"):
        A.maxmargin.ntp_gradient_descent_batch([], 5, 1.0, [5])
