"""One-layer softmax attention with the W, (K, Q) and p parameterizations (paper A section 2,
paper B section 2; THEORY.md section 1).

For one example, the logits are ``a_t = x_t^T W z`` and the output is ``r = X^T S(a)``; the prediction
is ``f(X) = h(r)``. Every parameter carries optional leading *trials* dimensions: a ``W`` of shape
``(B, d, d)`` trains ``B`` independent models, one per instance of a batched :class:`Problem`.

Numerics (THEORY.md section 5, pitfall 2): the output is computed re-centred on the top token,
``r = x_a + sum_t s_t (x_t - x_a)`` with ``a = argmax_t a_t`` (index detached). The value is the same,
but the backward pass no longer subtracts two numbers equal to 1 - 1e-20, so gradients stay accurate
(relative precision) when the softmax saturates.
"""

from __future__ import annotations

from typing import Callable

import torch

from .data import Problem
from .utils import (DEFAULT_DTYPE, as_tensor, check_count, check_dtype, check_flag, check_generator,
                    check_nonempty, check_positive, get_device)


class Attention:
    """Base class: a list of trainable tensors and the logits they produce."""

    params: list[torch.Tensor]
    names: list[str]
    core_dims: list[int]          # trailing dimensions of each parameter that are not trials

    def logits(self, problem: Problem) -> torch.Tensor:
        """Attention logits ``a_it``, shape ``(*B, n, T)``."""
        raise NotImplementedError

    def combined(self) -> torch.Tensor:
        """The quantity the theory is about: ``W`` (or ``K Q^T``, or ``p``), detached."""
        raise NotImplementedError

    def probabilities(self, problem: Problem) -> torch.Tensor:
        """Softmax probabilities ``S(X W z)``, shape ``(*B, n, T)``."""
        with torch.no_grad():
            return torch.softmax(self.logits(problem), dim=-1)

    def _own_factors(self, factors: dict[str, torch.Tensor], core: int, shape: str) -> None:
        """Own two factors of one shape (``core`` trailing dimensions, described by ``shape``);
        the second takes the first's dtype and device."""
        (a_name, a), (b_name, b) = factors.items()
        a, b = as_tensor(a, a_name), as_tensor(b, b_name, dtype=None)
        if a.shape != b.shape or a.ndim < core:
            raise ValueError(f"{a_name} and {b_name} must both have shape {shape}, got "
                             f"{tuple(a.shape)} and {tuple(b.shape)}")
        check_nonempty(a, a_name)
        self._own({a_name: a, b_name: b.to(a)}, core_dims=core)

    def _own(self, tensors: dict[str, torch.Tensor], core_dims: int) -> None:
        self.names = list(tensors)
        self.params = [t.detach().clone().requires_grad_(True) for t in tensors.values()]
        self.core_dims = [core_dims] * len(self.params)


def _linear_default(shape: tuple[int, int], fan_in: int, trials: int | None,
                    generator: torch.Generator | None, dtype: torch.dtype,
                    device: str | torch.device) -> torch.Tensor:
    """Entries uniform on ``[-1/sqrt(fan_in), 1/sqrt(fan_in)]``: the bound of PyTorch's default
    ``nn.Linear`` weight initialization (Kaiming-uniform with ``a = sqrt(5)``). Drawn on the CPU."""
    fan_in = check_count(fan_in, "d", 1)
    lead = () if trials is None else (check_count(trials, "trials", 1),)
    check_generator(generator)
    bound = fan_in ** -0.5
    U = torch.rand(*lead, *shape, generator=generator, dtype=check_dtype(dtype))
    return ((2 * U - 1) * bound).to(get_device(device))


class WAttention(Attention):
    """Combined key-query matrix ``W`` of shape ``(*B, d, d)``: logits ``x_t^T W z``."""

    def __init__(self, W: torch.Tensor) -> None:
        W = as_tensor(W, "W")
        if W.ndim < 2 or W.shape[-1] != W.shape[-2]:
            raise ValueError(f"W must have shape (..., d, d), got {tuple(W.shape)}")
        check_nonempty(W, "W")
        self._own({"W": W}, core_dims=2)

    @classmethod
    def zeros(cls, d: int, trials: int | None = None, dtype: torch.dtype = DEFAULT_DTYPE,
              device: str | torch.device = "cpu") -> "WAttention":
        d = check_count(d, "d", 1)
        lead = () if trials is None else (check_count(trials, "trials", 1),)
        return cls(torch.zeros(*lead, d, d, dtype=check_dtype(dtype), device=get_device(device)))

    @classmethod
    def pytorch_default(cls, d: int, trials: int | None = None, generator: torch.Generator | None = None,
                        dtype: torch.dtype = DEFAULT_DTYPE, device: str | torch.device = "cpu") -> "WAttention":
        """The start of paper A's code: PyTorch's default ``nn.Linear(d, d)`` initialization, entries
        i.i.d. uniform on ``[-1/sqrt(d), 1/sqrt(d)]`` (drawn here from ``generator``; theirs is unseeded)."""
        return cls(_linear_default((d, d), d, trials, generator, dtype, device))

    @property
    def W(self) -> torch.Tensor:
        return self.params[0]

    def logits(self, problem: Problem) -> torch.Tensor:
        _check_dim(problem, self.W.shape[-1], self.params)
        Wz = problem.Z @ self.W.transpose(-1, -2)                        # (W z_i)^T, (*B, n, d)
        return problem.mask_logits((problem.X @ Wz.unsqueeze(-1)).squeeze(-1))

    def combined(self) -> torch.Tensor:
        return self.W.detach()


class KQAttention(Attention):
    """Factored attention ``W = K Q^T`` with ``K, Q`` of shape ``(*B, d, m)``: logits ``(K^T x_t)^T (Q^T z)``."""

    def __init__(self, K: torch.Tensor, Q: torch.Tensor) -> None:
        self._own_factors({"K": K, "Q": Q}, 2, "(..., d, m)")

    @classmethod
    def init(cls, d: int, m: int | None = None, trials: int | None = None, scale: float = 0.1,
             generator: torch.Generator | None = None, dtype: torch.dtype = DEFAULT_DTYPE,
             device: str | torch.device = "cpu") -> "KQAttention":
        """The protocol of paper A's experiments: ``Q(0) = 0``, ``K(0) = scale * N(0, 1)``; ``m = d`` by default."""
        d = check_count(d, "d", 1)
        m = d if m is None else check_count(m, "m", 1)
        lead = () if trials is None else (check_count(trials, "trials", 1),)
        scale = check_positive(scale, "scale")
        check_generator(generator)
        K = scale * torch.randn(*lead, d, m, generator=generator, dtype=check_dtype(dtype))
        dev = get_device(device)
        return cls(K.to(dev), torch.zeros_like(K, device=dev))

    @classmethod
    def pytorch_default(cls, d: int, m: int | None = None, trials: int | None = None,
                        generator: torch.Generator | None = None, dtype: torch.dtype = DEFAULT_DTYPE,
                        device: str | torch.device = "cpu") -> "KQAttention":
        """The start of paper A's code: ``K`` and ``Q`` as PyTorch's default ``nn.Linear(d, m)``
        initialization, entries i.i.d. uniform on ``[-1/sqrt(d), 1/sqrt(d)]`` (K drawn first, then Q,
        from ``generator``; theirs is unseeded). ``m = d`` by default."""
        m = d if m is None else check_count(m, "m", 1)
        K = _linear_default((d, m), d, trials, generator, dtype, device)
        return cls(K, _linear_default((d, m), d, trials, generator, dtype, device))

    @property
    def K(self) -> torch.Tensor:
        return self.params[0]

    @property
    def Q(self) -> torch.Tensor:
        return self.params[1]

    def logits(self, problem: Problem) -> torch.Tensor:
        _check_dim(problem, self.K.shape[-2], self.params)
        Wz = (problem.Z @ self.Q) @ self.K.transpose(-1, -2)             # (K Q^T z_i)^T
        return problem.mask_logits((problem.X @ Wz.unsqueeze(-1)).squeeze(-1))

    def combined(self) -> torch.Tensor:
        return (self.K @ self.Q.transpose(-1, -2)).detach()


class DiagonalAttention(Attention):
    """Diagonal factorization ``W = diag(k * q)`` with ``k, q`` of shape ``(*B, d)`` (Sheen et al.
    2024): logits ``sum_j x_tj k_j q_j z_j``. Its balanced-norm penalty is the l1 norm of the
    diagonal, as the nuclear norm is for ``K Q^T``."""

    def __init__(self, k: torch.Tensor, q: torch.Tensor) -> None:
        self._own_factors({"k": k, "q": q}, 1, "(..., d)")

    @classmethod
    def init(cls, d: int, trials: int | None = None, scale: float = 0.1,
             dtype: torch.dtype = DEFAULT_DTYPE, device: str | torch.device = "cpu") -> "DiagonalAttention":
        """``k(0) = scale * 1``, ``q(0) = 0``, the usual start of diagonal networks. (A start with
        ``k = q`` would stay so under GD, whose updates treat the factors alike, and lock
        ``W = diag(k^2) >= 0``; ``k = q = 0`` is a stationary point.)"""
        d = check_count(d, "d", 1)
        lead = () if trials is None else (check_count(trials, "trials", 1),)
        scale = check_positive(scale, "scale")
        k = torch.full((*lead, d), scale, dtype=check_dtype(dtype), device=get_device(device))
        return cls(k, torch.zeros_like(k))

    def logits(self, problem: Problem) -> torch.Tensor:
        _check_dim(problem, self.params[0].shape[-1], self.params)
        scaled = problem.Z * (self.params[0] * self.params[1]).unsqueeze(-2)     # diag(k q) z_i
        return problem.mask_logits((problem.X @ scaled.unsqueeze(-1)).squeeze(-1))

    def combined(self) -> torch.Tensor:
        return torch.diag_embed(self.params[0] * self.params[1]).detach()


class PromptAttention(Attention):
    """Paper B's prompt (query) vector ``p`` of shape ``(*B, d)``: logits ``x_t^T W_key p``.

    The queries ``Z`` of the problem are ignored; ``W_key`` is fixed (identity by default), so the
    keys are ``k_t = W_key^T x_t`` and ``p`` plays the role of ``W z`` in the W-parameterization.
    """

    def __init__(self, p: torch.Tensor, key_matrix: torch.Tensor | None = None) -> None:
        p = as_tensor(p, "p")
        if p.ndim < 1:
            raise ValueError("p must be a vector of shape (..., d), got a scalar")
        check_nonempty(p, "p")
        if key_matrix is not None:
            key_matrix = as_tensor(key_matrix, "key_matrix").to(p)
            if key_matrix.ndim != 2 or key_matrix.shape[-1] != p.shape[-1]:
                raise ValueError(f"key_matrix must have shape (d, {p.shape[-1]}) (tokens of "
                                 f"dimension d to keys of p's dimension), got "
                                 f"{tuple(key_matrix.shape)}")
            check_nonempty(key_matrix, "key_matrix")
        self.key_matrix = key_matrix
        self._own({"p": p}, core_dims=1)

    @property
    def p(self) -> torch.Tensor:
        return self.params[0]

    def logits(self, problem: Problem) -> torch.Tensor:
        _check_dim(problem, self.p.shape[-1] if self.key_matrix is None else self.key_matrix.shape[-2],
                   self.params)
        keys = problem.X if self.key_matrix is None else problem.X @ self.key_matrix
        return problem.mask_logits(torch.einsum("...ntd,...d->...nt", keys, self.p))

    def combined(self) -> torch.Tensor:
        return self.p.detach()


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
    :class:`Problem`, and ``ValueError`` unless the parameters match the problem in dtype and
    device and their trials dimensions broadcast with the problem's."""
    if not isinstance(attention, Attention):
        raise TypeError(f"attention must be a WAttention, KQAttention or PromptAttention, got "
                        f"{type(attention).__name__} (wrap a matrix W as A.WAttention(W))")
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__} "
                        "(build one with A.Problem(X, Y, Z, v))")
    for name, p, k in zip(attention.names, attention.params, attention.core_dims):
        if p.dtype != problem.X.dtype or p.device != problem.X.device:
            raise ValueError(f"parameter {name} is {p.dtype} on {p.device} but the problem is "
                             f"{problem.X.dtype} on {problem.X.device}; use problem.to(...) or "
                             "build the parameters with the same dtype/device")
        lead = tuple(p.shape[: p.ndim - k])
        try:
            torch.broadcast_shapes(lead, problem.batch_shape)
        except RuntimeError:
            raise ValueError(f"the parameters have trials shape {lead} and the problem "
                             f"{problem.batch_shape}: they must match (or one must be empty)") from None


def check_head(head: "Head | None", problem: Problem) -> None:
    """Raise ``ValueError`` unless the head acts on vectors of the tokens' dimension ``d``."""
    if head is not None and not isinstance(head, (LinearHead, MLPHead, PenalizedHead)):
        raise TypeError(f"head must be None, a LinearHead, an MLPHead or a PenalizedHead, got "
                        f"{type(head).__name__}")
    if isinstance(head, LinearHead) and head.params:
        tensor, core = head.params[0], 1
        if tensor.dtype != problem.X.dtype or tensor.device != problem.X.device:
            raise ValueError(f"the head's v is {tensor.dtype} on {tensor.device} but the problem is "
                             f"{problem.X.dtype} on {problem.X.device}; build v with the same "
                             "dtype/device")
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
            tuple(torch.broadcast_shapes(lead, problem.batch_shape)) == tuple(problem.batch_shape)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"the head has trials shape {lead} and the problem "
                         f"{problem.batch_shape}: a head with trials dimensions needs one per trial "
                         "of the problem (or none, to share one head)")


def risk_from_logits(logits: torch.Tensor, problem: Problem, head: Head | None = None,
                     loss: str = "logistic", stable: bool = True) -> torch.Tensor:
    """The empirical risk given precomputed attention logits ``(*B, n, T)``."""
    check_loss(loss)
    outputs = (head or LinearHead())(_attend(problem.X, logits, stable), problem)
    return LOSSES[loss](problem.Y * outputs).mean(dim=-1)


def _check_dim(problem: Problem, d: int, params: list[torch.Tensor]) -> None:
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if problem.d != d:
        raise ValueError(f"the attention parameters act on dimension {d}, the tokens have d={problem.d}")
    for p in params:
        if p.dtype != problem.X.dtype or p.device != problem.X.device:
            raise ValueError(f"the attention parameters are {p.dtype} on {p.device} but the problem "
                             f"is {problem.X.dtype} on {problem.X.device}; use problem.to(...) or "
                             "build the parameters with the same dtype/device")
