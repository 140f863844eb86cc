"""The output side of the attention model: the softmax output (re-centred, the numerics appendix,
pitfall 2), the heads h(r) (paper A's linear and MLP heads, paper B's penalized head), the losses,
the prediction and the empirical risk, and the checks every trainer runs on its inputs.
"""

from __future__ import annotations

from typing import Callable

import torch

from .data import Problem, check_like_problem
from .models import Attention, _check_dim
from .utils import as_tensor, broadcast_shape, check_flag, check_nonempty, check_positive


def attention_output(X: torch.Tensor, logits: torch.Tensor, stable: bool = True) -> torch.Tensor:
    """``r_i = X_i^T S(a_i)``, shape ``(*B, n, d)``; re-centred on the top token when ``stable``.

    ``stable=False`` is the textbook formula, kept to show what it does once the softmax saturates.
    """
    stable = check_flag(stable, "stable")
    if not isinstance(X, torch.Tensor) or not isinstance(logits, torch.Tensor):
        raise TypeError("X and logits must be tensors (X (*B, n, T, d), logits (*B, n, T))")
    if X.ndim < 3 or tuple(logits.shape[-2:]) != tuple(X.shape[-3:-1]):
        raise ValueError(f"logits {tuple(logits.shape)} must end with X's (n, T) "
                         f"{tuple(X.shape[-3:-1])}")
    if bool(torch.isnan(logits).any()) or bool((logits == float("inf")).any()) \
            or bool((logits == -float("inf")).all(-1).any()):
        raise ValueError("the logits hold NaN or +inf, or a query with every logit -inf (no token "
                         "to attend to): they overflow float64 or the mask hides everything; "
                         "rescale W, X or z")
    return _attend(X, logits, stable)


def _attend(X: torch.Tensor, logits: torch.Tensor, stable: bool) -> torch.Tensor:
    """:func:`attention_output` without its checks, for the library's own calls (the training loop
    runs it at every step; predict and empirical_risk check their results instead)."""
    if not stable:
        return torch.einsum("...nt,...ntd->...nd", torch.softmax(logits, dim=-1), X)
    top = logits.detach().argmax(dim=-1, keepdim=True)
    x_top = torch.take_along_dim(X, top.unsqueeze(-1), dim=-2)      # (*B, n, 1, d)
    probs = torch.softmax(logits, dim=-1)
    return x_top.squeeze(-2) + torch.einsum("...nt,...ntd->...nd", probs, X - x_top)


class LinearHead:
    """``h(r) = v^T r``; ``v`` comes from the problem unless given (then trainable, paper B)."""

    def __init__(self, v: torch.Tensor | None = None) -> None:
        if v is not None:
            v = as_tensor(v, "v")
            if v.ndim < 1:
                raise ValueError("v must be a vector of shape (..., d), got a scalar")
            check_nonempty(v, "v")
        self.params = [] if v is None else [v.detach().clone().requires_grad_(True)]
        self.names = [] if v is None else ["v"]
        self.core_dims = [1] * len(self.params)

    def __call__(self, r: torch.Tensor, problem: Problem) -> torch.Tensor:
        v = self.params[0] if self.params else problem.v
        return torch.einsum("...nd,...d->...n", r, v.expand(*r.shape[:-2], r.shape[-1]))


class MLPHead:
    """Nonlinear head ``h(r) = sum_j a_j ReLU(V_j^T r)`` with fixed ``V (*B, d, k)`` and ``a (k,)``."""

    def __init__(self, V: torch.Tensor, a: torch.Tensor | None = None) -> None:
        self.V = as_tensor(V, "V")
        if self.V.ndim < 2:
            raise ValueError(f"V must have shape (..., d, k), got {tuple(self.V.shape)}")
        check_nonempty(self.V, "V")
        self.a = torch.ones(self.V.shape[-1], dtype=self.V.dtype) if a is None else as_tensor(a, "a")
        if tuple(self.a.shape) != (self.V.shape[-1],):
            raise ValueError(f"a must have shape ({self.V.shape[-1]},), one weight per column of "
                             f"V, got {tuple(self.a.shape)}")
        self.params: list[torch.Tensor] = []
        self.names: list[str] = []
        self.core_dims: list[int] = []

    def __call__(self, r: torch.Tensor, problem: Problem) -> torch.Tensor:
        hidden = torch.relu(torch.einsum("...nd,...dk->...nk", r, self.V.to(r)))
        return hidden @ self.a.to(r)


class PenalizedHead:
    """Nonlinear head ``h(r) = v^T r - lam ||r||^2`` with fixed ``v (*B, d)`` (paper A's "lambda"
    head): it rewards the direction ``v`` but penalizes long outputs, so a mixture of tokens can
    beat every single token."""

    def __init__(self, v: torch.Tensor, lam: float) -> None:
        self.v = as_tensor(v, "v")
        if self.v.ndim < 1:
            raise ValueError("v must be a vector of shape (..., d), got a scalar")
        check_nonempty(self.v, "v")
        self.lam = check_positive(lam, "lam")
        self.params: list[torch.Tensor] = []
        self.names: list[str] = []
        self.core_dims: list[int] = []

    def __call__(self, r: torch.Tensor, problem: Problem) -> torch.Tensor:
        v = self.v.to(r)
        return torch.einsum("...nd,...d->...n", r, v.expand(*r.shape[:-2], r.shape[-1])) \
            - self.lam * (r * r).sum(-1)


LOSSES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "logistic": lambda u: torch.nn.functional.softplus(-u),    # log(1 + exp(-u)), stable
    "exponential": lambda u: torch.exp(-u),
    "linear": lambda u: -u,
}


Head = LinearHead | MLPHead | PenalizedHead


def predict(attention: Attention, problem: Problem, head: Head | None = None,
            stable: bool = True) -> torch.Tensor:
    """Model outputs ``f(X_i) = h(X_i^T S(X_i W z_i))``, shape ``(*B, n)``."""
    stable = check_flag(stable, "stable")
    check_compatible(attention, problem)
    check_head(head, problem)
    head = head or LinearHead()
    out = head(_attend(problem.X, attention.logits(problem), stable), problem)
    if not bool(torch.isfinite(out).all()):
        raise ValueError("the model's outputs overflow float64 (NaN or inf): the tokens, the head "
                         "or the attention parameters are too large; rescale them")
    return out


def empirical_risk(attention: Attention, problem: Problem, head: Head | None = None,
                   loss: str = "logistic", stable: bool = True) -> torch.Tensor:
    """``L = (1/n) sum_i loss(Y_i f(X_i))`` per trial, shape ``(*B,)`` (paper A eq. (ERM))."""
    stable = check_flag(stable, "stable")
    check_compatible(attention, problem)
    check_head(head, problem)
    risk = risk_from_logits(attention.logits(problem), problem, head, loss, stable)
    if not bool(torch.isfinite(risk).all()):
        raise ValueError(f"the {loss} risk overflows float64 (NaN or inf): the margins Y f are too "
                         "large and negative for this loss; rescale W, X or z, or use the logistic loss")
    return risk


def check_loss(loss: str) -> None:
    """Raise ``ValueError`` unless ``loss`` names one of :data:`LOSSES`."""
    if not isinstance(loss, str) or loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; choose one of {sorted(LOSSES)}")


def check_compatible(attention: Attention, problem: Problem) -> None:
    """Raise ``TypeError`` unless ``attention`` is an :class:`Attention` and ``problem`` a
    :class:`Problem`, and ``ValueError`` unless the parameters match the problem in dtype,
    device and token dimension ``d`` and their trials dimensions broadcast with the problem's."""
    if not isinstance(attention, Attention):
        raise TypeError(f"attention must be a WAttention, KQAttention or PromptAttention, got "
                        f"{type(attention).__name__} (wrap a matrix W as A.WAttention(W))")
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__} "
                        "(build one with A.Problem(X, Y, Z, v))")
    for p, k in zip(attention.params, attention.core_dims):
        lead = tuple(p.shape[: p.ndim - k])
        try:
            broadcast_shape(lead, problem.batch_shape)
        except RuntimeError:
            raise ValueError(f"the parameters have trials shape {lead} and the problem "
                             f"{problem.batch_shape}: they must match (or one must be empty)") from None
    _check_dim(problem, attention)             # the token dimension, the dtype and the device


def check_head(head: "Head | None", problem: Problem) -> None:
    """Raise ``ValueError`` unless the head acts on vectors of the tokens' dimension ``d``."""
    if head is not None and not isinstance(head, (LinearHead, MLPHead, PenalizedHead)):
        raise TypeError(f"head must be None, a LinearHead, an MLPHead or a PenalizedHead, got "
                        f"{type(head).__name__}")
    if isinstance(head, LinearHead) and head.params:
        tensor, core = head.params[0], 1
        check_like_problem(tensor, "the head's v", problem)
    elif isinstance(head, MLPHead):
        tensor, core = head.V, 2
    elif isinstance(head, PenalizedHead):
        tensor, core = head.v, 1
    else:
        return
    width = tensor.shape[-core]
    if width != problem.d:
        raise ValueError(f"the head acts on vectors of dimension {width}, the tokens have "
                         f"d={problem.d}")
    lead = tuple(tensor.shape[: tensor.ndim - core])
    try:
        fits = not problem.batch_shape or \
            tuple(broadcast_shape(lead, problem.batch_shape)) == tuple(problem.batch_shape)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"the head has trials shape {lead} and the problem "
                         f"{problem.batch_shape}: a head with trials dimensions needs one per trial "
                         "of the problem (or none: a fixed head shared by every trial; a head "
                         "trained by attnsvm.train needs the run's trials)")


def risk_from_logits(logits: torch.Tensor, problem: Problem, head: Head | None = None,
                     loss: str = "logistic", stable: bool = True) -> torch.Tensor:
    """The empirical risk given precomputed attention logits ``(*B, n, T)``."""
    check_loss(loss)
    outputs = (head or LinearHead())(_attend(problem.X, logits, stable), problem)
    return LOSSES[loss](problem.Y * outputs).mean(dim=-1)
