"""One-layer softmax attention with the W, (K, Q) and p parameterizations (paper A section 2,
paper B section 2; book chapter 1).

For one example, the logits are ``a_t = x_t^T W z``; the output ``r = X^T S(a)``, the heads ``h(r)``, the
losses and the risk are in :mod:`attnsvm.model.heads`. Every parameter carries optional leading *trials* dimensions: a ``W`` of shape
``(B, d, d)`` trains ``B`` independent models, one per instance of a batched :class:`Problem`.

Numerics (the numerics appendix): the output is computed re-centred on the top token,
``r = x_a + sum_t s_t (x_t - x_a)`` with ``a = argmax_t a_t`` (index detached). The value is the same,
but the backward pass no longer subtracts two numbers equal to 1 - 1e-20, so gradients stay accurate
(relative precision) when the softmax saturates.
"""

from __future__ import annotations

import torch

from .data import Problem, check_like_problem
from .utils import (DEFAULT_DTYPE, as_tensor, check_count, check_dtype, check_generator, check_nonempty,
                    check_positive, get_device)


class Attention:
    """Base class: a list of trainable tensors and the logits they produce."""

    params: list[torch.Tensor]
    names: list[str]
    core_dims: list[int]          # trailing dimensions of each parameter that are not trials

    def logits(self, problem: Problem) -> torch.Tensor:
        """Attention logits ``a_it``, shape ``(*B, n, T)``."""
        _check_dim(problem, self)
        return self._logits(problem)

    def _width(self) -> int:
        """The token dimension ``d`` the parameters act on."""
        raise NotImplementedError

    def _logits(self, problem: Problem) -> torch.Tensor:
        """:meth:`logits` on a problem already checked (the training loop's version)."""
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
        """``W = 0`` of shape ``(d, d)`` (or ``(trials, d, d)``): paper A's start for W."""
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

    def _width(self) -> int:
        return self.W.shape[-1]

    def _logits(self, problem: Problem) -> torch.Tensor:
        Wz = matmul(problem.Z, self.W.transpose(-1, -2))                # (W z_i)^T, (*B, n, d)
        return problem.mask_logits(matvec(problem.X, Wz))

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

    def _width(self) -> int:
        return self.K.shape[-2]

    def _logits(self, problem: Problem) -> torch.Tensor:
        Wz = matmul(matmul(problem.Z, self.Q), self.K.transpose(-1, -2))    # (K Q^T z_i)^T
        return problem.mask_logits(matvec(problem.X, Wz))

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

    def _width(self) -> int:
        return self.params[0].shape[-1]

    def _logits(self, problem: Problem) -> torch.Tensor:
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

    def _width(self) -> int:
        return self.p.shape[-1] if self.key_matrix is None else self.key_matrix.shape[-2]

    def _logits(self, problem: Problem) -> torch.Tensor:
        keys = problem.X if self.key_matrix is None else problem.X @ self.key_matrix
        return problem.mask_logits(torch.einsum("...ntd,...d->...nt", keys, self.p))

    def combined(self) -> torch.Tensor:
        return self.p.detach()


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b``, calling ``bmm`` directly when both have the same batch dimensions (what
    ``torch.matmul`` does then, without its expand and reshape steps: the same floats)."""
    if a.ndim >= 3 and a.shape[:-2] == b.shape[:-2]:
        out = torch.bmm(a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:]))
        return out.view(*a.shape[:-1], b.shape[-1])
    return a @ b


def matvec(M: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``(M @ x[..., None])[..., 0]``: a batch of matrices ``(..., T, d)`` times vectors ``(..., d)``."""
    return matmul(M, x.unsqueeze(-1)).squeeze(-1)


def _check_dim(problem: Problem, attention: Attention) -> None:
    """Raise unless ``problem`` is a Problem whose tokens have the dimension the parameters act on
    and whose dtype and device they share (:func:`~attnsvm.model.data.check_like_problem`)."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    d = attention._width()
    if problem.d != d:
        raise ValueError(f"the attention parameters act on dimension {d}, the tokens have "
                         f"d={problem.d}; build the attention for d={problem.d} (or use the "
                         "problem it was built for)")
    for name, p in zip(attention.names, attention.params):
        check_like_problem(p, f"the attention's {name}", problem)
