"""The closed-form linear-head gradients agree with autograd, and train() uses them."""

import math

import pytest
import torch

import attnsvm as A
from attnsvm.model.gradients import risk_and_gradients

D = torch.float64


def _attentions(trials: int, d: int):
    g = torch.Generator().manual_seed(5)
    r = lambda *s: torch.randn(*s, generator=g, dtype=D)  # noqa: E731
    return [A.WAttention(r(trials, d, d)), A.WAttention(r(d, d)),
            A.KQAttention(r(trials, d, 3), r(trials, d, 3)),
            A.PromptAttention(r(trials, d)), A.PromptAttention(r(d), key_matrix=r(d, d))]


@pytest.mark.parametrize("loss", ["logistic", "exponential", "linear"])
def test_closed_form_matches_autograd(loss):
    problem = A.random_problem(5, 6, 7, trials=4, generator=A.set_seed(0))
    for attention in _attentions(4, 7):
        risk, probs, grads = risk_and_gradients(attention, problem, loss)[:3]
        reference = torch.autograd.grad(A.empirical_risk(attention, problem, loss=loss).sum(),
                                        attention.params)
        torch.testing.assert_close(risk, A.empirical_risk(attention, problem, loss=loss).detach(),
                                   rtol=1e-13, atol=1e-15)
        torch.testing.assert_close(probs, attention.probabilities(problem))
        for ours, theirs in zip(grads, reference):
            assert ours.shape == theirs.shape
            torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-14)


def test_closed_form_is_accurate_when_saturated():
    """Logit gaps of ~200: the textbook softmax backward returns rounding noise, ours does not."""
    problem = A.random_problem(3, 4, 5, generator=A.set_seed(1))
    W_mm = A.att_svm(problem.X, problem.Z, problem.opt).W
    attention = A.WAttention(150 * W_mm)            # every selected-vs-other logit gap >= 150
    (grad,) = risk_and_gradients(attention, problem).grads
    exact = torch.autograd.grad(A.empirical_risk(attention, problem).sum(), attention.params)[0]
    naive = torch.autograd.grad(A.empirical_risk(attention, problem, stable=False).sum(),
                                attention.params)[0]
    assert grad.norm() > 0
    torch.testing.assert_close(grad, exact, rtol=1e-10, atol=0)
    assert not torch.allclose(naive, exact, rtol=1e-3, atol=0)


def test_train_paths_agree():
    """train() with the fixed head (closed form) equals train() through autograd, forced by an
    MLP head that computes the same function: ReLU(v^T r) - ReLU(-v^T r) = v^T r."""
    problem = A.random_problem(4, 5, 6, trials=3, generator=A.set_seed(2))
    fast = A.WAttention.zeros(6, trials=3)
    A.train(fast, problem, 50)
    slow = A.WAttention.zeros(6, trials=3)
    head = A.MLPHead(torch.stack([problem.v, -problem.v], -1), torch.tensor([1.0, -1.0], dtype=D))
    A.train(slow, problem, 50, head=head)
    torch.testing.assert_close(fast.W.detach(), slow.W.detach(), rtol=1e-9, atol=1e-12)


def test_optimal_risk_and_excess_risk():
    """L* is the risk of all attention on opt; L - L* computed without cancellation agrees with
    the direct difference where that is accurate, and stays positive and accurate (relative
    precision, against a 400-digit computation) deep in saturation, where the direct difference
    is exactly 0."""
    import mpmath

    problem = A.figure_problem("A2", generator=A.set_seed(3))
    W_mm = A.att_svm(problem.X, problem.Z, problem.opt).W
    L_star = A.model.optimal_risk(problem)
    assert torch.allclose(L_star, torch.nn.functional.softplus(-problem.scores.max(-1).values).mean())
    for c in (-3.0, 0.5, 2.0):              # moderate (top = opt or not): the direct difference is fine
        att = A.WAttention(c * W_mm)
        direct = A.empirical_risk(att, problem).detach() - L_star
        assert math.isclose(float(A.excess_risk(att, problem)), float(direct), rel_tol=1e-9)
    mpmath.mp.dps = 400
    att = A.WAttention(300 * W_mm)                          # logit gaps >= 300: s ~ 1e-130
    excess = float(A.excess_risk(att, problem))
    assert float(A.empirical_risk(att, problem).detach() - L_star) == 0.0
    logits = att.logits(problem).detach()
    values = problem.scores * problem.Y.unsqueeze(-1)
    exact = mpmath.mpf(0)
    for i in range(problem.n):
        a = [mpmath.mpf(float(x)) for x in logits[i]]
        top = max(a)
        w = [mpmath.e ** (x - top) for x in a]
        f = sum(wi * mpmath.mpf(float(v)) for wi, v in zip(w, values[i])) / sum(w)
        y = mpmath.mpf(float(problem.Y[i]))
        best = max(mpmath.mpf(float(g)) for g in problem.scores[i])
        exact += mpmath.log(1 + mpmath.e ** (-y * f)) - mpmath.log(1 + mpmath.e ** (-best))
    exact /= problem.n
    assert excess > 0 and math.isclose(excess, float(exact), rel_tol=1e-9)


def _textbook_evaluation(attention, problem, loss):
    """The closed form written term by term as in its docstring (values, Y_i c_b, loss'(u) Y / n),
    without the shared terms the training loop's version precomputes."""
    from attnsvm.model.gradients import LOSS_DERIVATIVES
    from attnsvm.model.heads import LOSSES

    with torch.no_grad():
        logits = attention.logits(problem)
        values = problem.scores * problem.Y.unsqueeze(-1)
        top = logits.argmax(dim=-1, keepdim=True)
        centred = values - torch.take_along_dim(values, top, dim=-1)
        probs = torch.softmax(logits, dim=-1)
        mix = (probs * centred).sum(-1, keepdim=True)
        margins = problem.Y * values.gather(-1, top).squeeze(-1) + problem.Y * mix.squeeze(-1)
        outer = LOSS_DERIVATIVES[loss](margins) * problem.Y / problem.n
        G = outer.unsqueeze(-1) * probs * (centred - mix)
        return LOSSES[loss](margins).mean(-1), probs, (G.unsqueeze(-1) * problem.X).sum(-2)


@pytest.mark.parametrize("loss", ["logistic", "exponential", "linear"])
def test_training_evaluation_is_bitwise_the_formula(loss):
    """The loop's evaluation (shared terms precomputed, -loss'(u) / (-n Y_i) for loss'(u) Y_i / n,
    the excess skipped) returns exactly the bits of the formula and of risk_and_gradients."""
    from attnsvm.model.gradients import evaluate, fixed_terms

    problem = A.random_problem(5, 6, 7, trials=4, generator=A.set_seed(6))
    for attention in _attentions(4, 7):
        fast = evaluate(attention, problem, loss, fixed_terms(problem), excess=False)
        full = risk_and_gradients(attention, problem, loss)
        risk, probs, GX = _textbook_evaluation(attention, problem, loss)
        assert torch.equal(fast.risk, risk) and torch.equal(fast.probs, probs)
        assert torch.equal(fast.risk, full.risk) and torch.equal(fast.top, full.top)
        for a, b in zip(fast.grads, full.grads):
            assert torch.equal(a, b)
        assert torch.isnan(fast.excess).all() and torch.isfinite(full.excess).all()
    W = A.WAttention(torch.randn(4, 7, 7, generator=torch.Generator().manual_seed(1), dtype=D))
    GX = _textbook_evaluation(W, problem, loss)[2]
    assert torch.equal(risk_and_gradients(W, problem, loss).grads[0], GX.transpose(-1, -2) @ problem.Z)
