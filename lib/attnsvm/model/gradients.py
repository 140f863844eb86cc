"""Closed-form gradients of the ERM for a fixed linear head (paper A eq. (ERM); the numerics appendix).

For one example with logits ``a_t``, probabilities ``s = S(a)``, token values ``c_t = v^T x_t`` and
top token ``b = argmax_t a_t``, the output is ``f = c_b + sum_t s_t (c_t - c_b)`` and

    df/da_t = s_t ((c_t - c_b) - sum_tau s_tau (c_tau - c_b)),

which is accurate to relative precision however saturated ``s`` is (every term is a product of
small numbers, never a difference of numbers close to 1). The risk gradient is
``G_it = loss'(Y_i f_i) Y_i / n * df_i/da_it`` and, with logits ``a_it = x_it^T W z_i``,
``dL/dW = sum_it G_it x_it z_i^T``; the chain rule gives (K, Q) and p. This path skips autograd's
bookkeeping, which dominates the cost for these small models; ``train`` uses it whenever the head
is the problem's fixed ``v``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .data import Problem
from .heads import LOSSES, check_compatible, check_loss
from .models import Attention, KQAttention, PromptAttention, WAttention, matmul

LOSS_DERIVATIVES = {                         # loss'(u) for each entry of heads.LOSSES
    "logistic": lambda u: -torch.sigmoid(-u),
    "exponential": lambda u: -torch.exp(-u),
    "linear": lambda u: -torch.ones_like(u),
}


LOSS_INCREMENTS = {                          # loss(u + delta) - loss(u), without cancellation
    "logistic": lambda u, delta: torch.log1p(torch.sigmoid(-u) * torch.expm1(-delta)),
    "exponential": lambda u, delta: torch.exp(-u) * torch.expm1(-delta),
    "linear": lambda u, delta: -delta,
}


class Evaluation(NamedTuple):
    """The risk at one point, with what comparing two points accurately needs.

    ``risk`` per trial ``(*B,)``; ``probs`` ``(*B, n, T)``; ``grads`` like ``attention.params``.
    ``top`` ``(*B, n)`` is the token with the largest logit and ``excess`` ``(*B,)`` the risk minus
    the risk of putting all attention on ``top``, computed without cancellation: where two points
    share ``top``, their risks differ by the difference of their ``excess``, which stays accurate
    long after ``risk`` itself has rounded to the same float (see :func:`no_worse`).
    """

    risk: torch.Tensor
    probs: torch.Tensor
    grads: list[torch.Tensor]
    top: torch.Tensor
    excess: torch.Tensor


def no_worse(new: Evaluation, old: Evaluation, rounding: float = 8.0) -> torch.Tensor:
    """Per trial: is the risk at ``new`` at most the risk at ``old``, up to ``rounding`` units in
    the last place? Compares the ``excess`` where both select the same top tokens (accurate to
    relative precision however saturated the softmax), the risks elsewhere."""
    same = (new.top == old.top).all(dim=-1)
    ulp = rounding * torch.finfo(new.risk.dtype).eps
    return torch.where(same, new.excess <= old.excess + ulp * old.excess.abs(),
                       new.risk <= old.risk + ulp * old.risk.abs())


def optimal_risk(problem: Problem, loss: str = "logistic") -> torch.Tensor:
    """``L* = (1/n) sum_i loss(gamma_{i,opt_i})`` per trial: the risk of all attention on the
    optimal tokens. Every finite W has a larger risk; L* is the infimum when Att-SVM(opt) is
    feasible (otherwise the infimum is larger; paper A, optimal tokens minimise the risk)."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    check_loss(loss)
    return LOSSES[loss](problem.allowed_scores.max(dim=-1).values).mean(-1)


def excess_over_optimal(evaluation: Evaluation, problem: Problem, loss: str) -> torch.Tensor:
    """``L - L*`` per trial, without cancellation: the evaluation's excess over its top tokens plus
    ``(1/n) sum_i [loss(gamma_{i,top}) - loss(gamma_{i,opt})]`` (0 where the top tokens are opt)."""
    scores = problem.allowed_scores
    best = scores.max(dim=-1).values
    top = scores.gather(-1, evaluation.top.unsqueeze(-1)).squeeze(-1)
    return evaluation.excess + LOSS_INCREMENTS[loss](best, top - best).mean(-1)


def excess_risk(attention: Attention, problem: Problem, loss: str = "logistic") -> torch.Tensor:
    """``L - L*`` per trial for the problem's fixed linear head (see :func:`optimal_risk`),
    accurate to relative precision however saturated the softmax (where ``L`` and ``L*`` agree to
    every float64 digit, their difference computed directly is 0 or rounding noise)."""
    check_loss(loss)
    check_compatible(attention, problem)
    if not supports(attention):
        raise ValueError("excess_risk needs a WAttention, KQAttention or PromptAttention")
    return excess_over_optimal(risk_and_gradients(attention, problem, loss), problem, loss)


def supports(attention: Attention) -> bool:
    """Whether a closed-form gradient exists for this parameterization."""
    return isinstance(attention, (WAttention, KQAttention, PromptAttention))


def risk_and_gradients(attention: Attention, problem: Problem, loss: str = "logistic",
                       values: torch.Tensor | None = None) -> Evaluation:
    """Risk per trial, probabilities and the gradients of the summed risk with respect to
    ``attention.params``, for the linear head ``v`` of the problem (see :class:`Evaluation`).
    ``values`` = ``v^T x_it`` may be passed precomputed (it does not change during training)."""
    logits = attention.logits(problem)                          # checks the dimensions
    if values is None:
        fixed = fixed_terms(problem)
    else:
        fixed = FixedTerms(values, values * problem.Y.unsqueeze(-1), problem.Y * -problem.n)
    return evaluate(attention, problem, loss, fixed, logits=logits)


class FixedTerms(NamedTuple):
    """What the closed-form gradient needs of a problem that does not change during training:
    the token values ``c_it = v^T x_it``, the scores ``gamma_it = Y_i c_it`` and ``-n Y_i``."""

    values: torch.Tensor
    scores: torch.Tensor
    minus_n_y: torch.Tensor


def fixed_terms(problem: Problem) -> FixedTerms:
    """:class:`FixedTerms` of a problem, computed once per training run."""
    scores = problem.scores
    return FixedTerms(scores * problem.Y.unsqueeze(-1), scores, problem.Y * -problem.n)


def _loss_terms(loss: str, flipped: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``loss(u)`` and ``-loss'(u)`` at the margins ``u``, given ``flipped = -u`` (the two share
    their work: ``softplus(-u)`` and ``sigmoid(-u)``, or ``exp(-u)`` twice)."""
    if loss == "logistic":
        return torch.nn.functional.softplus(flipped), torch.sigmoid(flipped)
    if loss == "exponential":
        e = torch.exp(flipped)
        return e, e
    return flipped, torch.ones_like(flipped)


def evaluate(attention: Attention, problem: Problem, loss: str, fixed: FixedTerms,
             excess: bool = True, logits: torch.Tensor | None = None,
             scratch: torch.Tensor | None = None) -> Evaluation:
    """:func:`risk_and_gradients` on arguments already checked (the training loop's version);
    ``excess=False`` skips the excess (NaN), which only the Polyak step and ``no_worse`` read;
    ``logits`` may be passed when already computed; ``scratch`` ``(*B, n, T, d)``, reused across
    calls, holds the products ``G_it x_it`` (no allocation of that, the largest array, per step)."""
    with torch.no_grad():
        X, Z, Y = problem.X, problem.Z, problem.Y
        values = fixed.values
        if logits is None:
            logits = attention._logits(problem)
        top = logits.argmax(dim=-1, keepdim=True)
        same = top.shape[:-1] == values.shape[:-1]                       # else broadcast
        centred = values - (values.gather(-1, top) if same else torch.take_along_dim(values, top, dim=-1))
        probs = torch.softmax(logits, dim=-1)
        mix = (probs * centred).sum(-1, keepdim=True)
        base = (fixed.scores.gather(-1, top) if same else
                torch.take_along_dim(fixed.scores, top, dim=-1)).squeeze(-1)  # Y_i c_b
        shift = Y * mix.squeeze(-1)
        margins = base + shift
        terms, slope = _loss_terms(loss, -margins)
        risk = terms.mean(-1)
        gain = LOSS_INCREMENTS[loss](base, shift).mean(-1) if excess else torch.full_like(risk, math.nan)
        outer = slope / fixed.minus_n_y                                # dL/df_i = loss'(u_i) Y_i / n
        G = outer.unsqueeze(-1) * probs * (centred - mix)                    # dL/da_it
        fits = scratch is not None and scratch.shape[:-1] == G.shape      # G spans X's trials
        products = torch.mul(G.unsqueeze(-1), X, out=scratch) if fits else G.unsqueeze(-1) * X
        GX = products.sum(-2)                                                # sum_t G_it x_it, (*B, n, d)
        if isinstance(attention, WAttention):
            grads = [_reduce(matmul(GX.transpose(-1, -2), Z), attention.W)]
        elif isinstance(attention, KQAttention):
            K, Q = attention.K, attention.Q
            query = matmul(Z, Q)                                            # Q^T z_i, (*B, n, m)
            grads = [_reduce(matmul(GX.transpose(-1, -2), query), K),
                     _reduce(matmul(Z.transpose(-1, -2), matmul(GX, K)), Q)]
        else:
            keys_grad = GX.sum(-2)
            if attention.key_matrix is not None:
                keys_grad = keys_grad @ attention.key_matrix
            grads = [_reduce(keys_grad, attention.p)]
    return Evaluation(risk, probs, grads, top.squeeze(-1), gain)


def _reduce(grad: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """Sum the gradient over trial dimensions the parameter does not have (shared parameters)."""
    while grad.ndim > param.ndim:
        grad = grad.sum(0)
    for dim, (g, p) in enumerate(zip(grad.shape, param.shape)):
        if p == 1 and g != 1:
            grad = grad.sum(dim, keepdim=True)
    return grad
