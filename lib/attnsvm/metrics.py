"""Measurements the book reports: correlation of directions, numerical rank, selected tokens
(paper A sections 3-4; THEORY.md sections 2 and 4).
"""

from __future__ import annotations

import torch

from .data import Problem


def corr(A, B, batch_dims: int = 0) -> torch.Tensor:
    """Cosine ``<A, B> / (||A||_F ||B||_F)`` between two arrays (matrices or vectors).

    Everything after the first ``batch_dims`` dimensions is flattened, so ``corr(W, W_mm, 1)`` on
    ``W (B, d, d)`` and ``W_mm (B, d, d)`` gives ``B`` correlations. Inputs are broadcast.
    A zero array has no direction: its correlation is NaN.
    """
    A, B = torch.as_tensor(A), torch.as_tensor(B)
    dtype = torch.promote_types(A.dtype, B.dtype)
    if not dtype.is_floating_point:
        dtype = torch.float64
    A, B = torch.broadcast_tensors(A.to(dtype), B.to(device=A.device, dtype=dtype))
    A, B = unit_scale(A.flatten(batch_dims)), unit_scale(B.flatten(batch_dims))
    inner = (A * B).sum(-1)
    norms = A.norm(dim=-1) * B.norm(dim=-1)
    return torch.where(norms > 0, inner / norms, torch.full_like(inner, float("nan")))


def unit_scale(x: torch.Tensor) -> torch.Tensor:
    """Divide each row by its largest entry, so squares neither overflow nor underflow."""
    top = x.abs().amax(dim=-1, keepdim=True)
    return x / torch.where(top > 0, top, torch.ones_like(top))


def numerical_rank(W, rtol: float = 1e-6) -> torch.Tensor:
    """Number of singular values above ``rtol * sigma_max`` (a *relative* tolerance; batched).

    A relative tolerance is what makes ranks of SVM solutions comparable across scales (THEORY.md
    section 5, pitfall 4: an absolute 1e-7 threshold reads solver residue as rank).
    """
    W = torch.as_tensor(W)
    sigma = torch.linalg.svdvals(W.to(torch.float64))
    top = sigma[..., :1]
    return (sigma > rtol * top).sum(-1) * (top[..., 0] > 0)


def max_probability(probabilities: torch.Tensor) -> torch.Tensor:
    """Average over examples of the largest softmax probability, shape ``(*B,)``: 1 = hard selection."""
    return probabilities.max(dim=-1).values.mean(dim=-1)


def selected_tokens(probabilities: torch.Tensor) -> torch.Tensor:
    """The token each example attends to most, shape ``(*B, n)`` (the selection ``alpha`` GD found)."""
    return probabilities.argmax(dim=-1)


def probability_on(probabilities: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Softmax mass on the tokens ``alpha`` (e.g. ``opt``), shape ``(*B, n)``."""
    return torch.take_along_dim(probabilities, alpha.unsqueeze(-1), dim=-1).squeeze(-1)


def probability_off(probabilities: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Softmax mass on every token *but* ``alpha``, shape ``(*B, n)``.

    It sums the small probabilities themselves, so it stays accurate where ``1 - s_alpha`` has
    cancelled to 0 (a saturated softmax; see the book's numerics appendix)."""
    alpha = torch.as_tensor(alpha, device=probabilities.device)
    others = torch.arange(probabilities.shape[-1], device=probabilities.device) != alpha.unsqueeze(-1)
    return (probabilities * others).sum(-1)


def is_global(problem: Problem, alpha: torch.Tensor) -> torch.Tensor:
    """Whether the selection ``alpha`` picks the optimal token in every example, shape ``(*B,)``."""
    return (alpha == problem.opt).all(dim=-1)
