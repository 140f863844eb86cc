"""Measurements the book reports: correlation of directions, numerical rank, selected tokens
(paper A sections 3-4; book chapters 1-2 and the reproduction report).
"""

from __future__ import annotations

import torch

from .data import Problem
from .utils import as_array, as_tensor, broadcast_shape, check_count, check_positive


def _probabilities(probabilities, name: str = "probabilities") -> torch.Tensor:
    """Finite softmax outputs ``(*B, n, T)`` with entries in ``[0, 1]``."""
    p = as_tensor(probabilities, name, dtype=None)
    if p.ndim < 1 or not p.numel():
        raise ValueError(f"{name} must have shape (..., T) with T >= 1, got {tuple(p.shape)}")
    if bool((p < 0).any()) or bool((p > 1).any()):
        raise ValueError(f"{name} must be softmax outputs in [0, 1]")
    return p


def _indices(alpha, shape: tuple[int, ...], T: int, device) -> torch.Tensor:
    alpha = as_array(alpha, "alpha")
    if alpha.is_floating_point() or alpha.dtype == torch.bool:
        raise TypeError(f"alpha must hold integer token indices, got {alpha.dtype}")
    try:
        alpha = torch.broadcast_to(alpha.to(device), shape)
    except RuntimeError:
        raise ValueError(f"alpha {tuple(alpha.shape)} does not fit the probabilities' (*B, n) = "
                         f"{shape}") from None
    if alpha.numel() and (bool((alpha < 0).any()) or bool((alpha >= T).any())):
        raise ValueError(f"alpha must hold token indices in [0, {T - 1}]")
    return alpha


def corr(A, B, batch_dims: int = 0) -> torch.Tensor:
    """Cosine ``<A, B> / (||A||_F ||B||_F)`` between two arrays (matrices or vectors).

    Everything after the first ``batch_dims`` dimensions is flattened, so ``corr(W, W_mm, 1)`` on
    ``W (B, d, d)`` and ``W_mm (B, d, d)`` gives ``B`` correlations. Inputs are broadcast.
    A zero array has no direction: its correlation is NaN.
    """
    A, B = as_tensor(A, "A", dtype=None), as_tensor(B, "B", dtype=None)
    batch_dims = check_count(batch_dims, "batch_dims")
    try:
        shape = broadcast_shape(A.shape, B.shape)
    except RuntimeError:
        raise ValueError(f"A {tuple(A.shape)} and B {tuple(B.shape)} do not broadcast") from None
    if batch_dims > len(shape) - 1 and len(shape):
        raise ValueError(f"batch_dims={batch_dims} leaves nothing to correlate in arrays of shape "
                         f"{tuple(shape)}")
    return correlation(A, B, batch_dims)


def correlation(A: torch.Tensor, B: torch.Tensor, batch_dims: int = 0) -> torch.Tensor:
    """:func:`corr` on tensors already checked (the training loop's version)."""
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


RANK_TOL = 1e-5
"""The library's one default rank tolerance (relative), for :func:`numerical_rank` and the rank
that :func:`attnsvm.att_svm` reports (``rank_tol`` in both)."""


def numerical_rank(W, rank_tol: float = RANK_TOL) -> torch.Tensor:
    """Number of singular values above ``rank_tol * sigma_max`` (a *relative* tolerance; batched).

    A relative tolerance is what makes ranks of SVM solutions comparable across scales (book chapter 3b, the rank figure: an absolute 1e-7 threshold reads solver residue as rank).
    """
    W = as_tensor(W, "W", dtype=None)
    rank_tol = check_positive(rank_tol, "rank_tol", upper=1.0)
    if rank_tol == 1.0:
        raise ValueError("rank_tol must be below 1: at 1 no singular value counts (every rank reads 0)")
    if W.ndim < 2 or not W.numel():
        raise ValueError(f"W must be a matrix (..., d, k) with d, k >= 1, got {tuple(W.shape)}")
    top = W.abs().amax((-2, -1), keepdim=True)
    if bool(((top > 0) & (top < torch.finfo(W.dtype).tiny)).any()):
        raise ValueError(f"W's largest entry is subnormal (below {torch.finfo(W.dtype).tiny:.1e} in "
                         f"{W.dtype}): its digits are lost, so no rank can be read off; rescale W")
    extreme = (top > 0) & ((top < 2.0 ** -30) | (top > 2.0 ** 30))     # exact power-of-two rescale
    exponent = torch.where(extreme, torch.frexp(top).exponent, torch.zeros_like(top, dtype=torch.int32))
    half = torch.div(exponent, 2, rounding_mode="floor")          # in two factors: 2^-e alone
    for e in (half, exponent - half):                              # overflows for subnormal tops
        W = W * torch.pow(2.0, -e.to(W.dtype))
    sigma = torch.linalg.svdvals(W.to(torch.float64))
    top = sigma[..., :1]
    return (sigma > rank_tol * top).sum(-1) * (top[..., 0] > 0)


def max_probability(probabilities: torch.Tensor) -> torch.Tensor:
    """Average over examples of the largest softmax probability, shape ``(*B,)``: 1 = hard selection."""
    probabilities = _probabilities(probabilities)
    if probabilities.ndim < 2:
        raise ValueError(f"probabilities must have shape (*B, n, T), got {tuple(probabilities.shape)}")
    return mean_top(probabilities)


def mean_top(probabilities: torch.Tensor) -> torch.Tensor:
    """:func:`max_probability` on a tensor already checked (the training loop's version)."""
    return probabilities.max(dim=-1).values.mean(dim=-1)


def selected_tokens(probabilities: torch.Tensor) -> torch.Tensor:
    """The token each example attends to most, shape ``(*B, n)`` (the selection ``alpha`` GD found)."""
    probabilities = _probabilities(probabilities)
    return probabilities.argmax(dim=-1)


def _softmax_rows(probabilities, where: str) -> torch.Tensor:
    """``_probabilities`` whose rows also sum to 1 within 1e-4 (softmax outputs)."""
    probabilities = _probabilities(probabilities)
    if bool(((probabilities.sum(-1) - 1).abs() > 1e-4).any()):
        raise ValueError(f"probabilities must be softmax outputs whose rows sum to 1; the mass {where} "
                         "a selection is not defined for other weights")
    return probabilities


def probability_on(probabilities: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Softmax mass on the tokens ``alpha`` (e.g. ``opt``), shape ``(*B, n)``. The rows must be
    softmax outputs, summing to 1 (within 1e-4)."""
    probabilities = _softmax_rows(probabilities, "on")
    alpha = _indices(alpha, tuple(probabilities.shape[:-1]), probabilities.shape[-1], probabilities.device)
    return torch.take_along_dim(probabilities, alpha.unsqueeze(-1), dim=-1).squeeze(-1)


def probability_off(probabilities: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Softmax mass on every token *but* ``alpha``, shape ``(*B, n)``.

    It sums the small probabilities themselves, so it stays accurate where ``1 - s_alpha`` has
    cancelled to 0 (a saturated softmax; see the book's numerics appendix). The rows must be
    softmax outputs, summing to 1 (within 1e-4)."""
    probabilities = _softmax_rows(probabilities, "off")
    alpha = _indices(alpha, tuple(probabilities.shape[:-1]), probabilities.shape[-1], probabilities.device)
    others = torch.arange(probabilities.shape[-1], device=probabilities.device) != alpha.unsqueeze(-1)
    return (probabilities * others).sum(-1)


def is_global(problem: Problem, alpha: torch.Tensor) -> torch.Tensor:
    """Whether the selection ``alpha`` picks the optimal token in every example, shape ``(*B,)``."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    opt = problem.opt
    raw = as_array(alpha, "alpha")
    try:
        shape = tuple(broadcast_shape(raw.shape, opt.shape))
    except RuntimeError:
        raise ValueError(f"alpha {tuple(raw.shape)} does not fit the problem's (*B, n) = "
                         f"{tuple(opt.shape)}") from None
    alpha = _indices(raw, shape, problem.T, opt.device)
    return (alpha == opt).all(dim=-1)
