"""The update rules of :func:`attnsvm.train` (paper A sections 4-5, paper B section 4; book chapters 2-4 and the numerics appendix): the normalized step, the Polyak step, the mirror map of the lp potential and the
polar factor of the spectral step, each per trial on blocks of ``core_dims`` trailing dimensions.
"""

from __future__ import annotations

import math

import torch

from .utils import check_count, check_positive


def block_normalize(grad: torch.Tensor, core_dims: int, eps: float = 0.0) -> torch.Tensor:
    """``g / (||g|| + eps)`` with the norm over the last ``core_dims`` dimensions (one per trial).

    The norm is taken after dividing by the largest entry, so gradients of 1e-200 (float64) or
    1e-30 (float32), exact but tiny once the softmax saturates, do not underflow to a zero norm.
    A zero gradient (e.g. ``dL/dK`` while ``Q = 0``) gives a zero step instead of 0/0.
    """
    if not isinstance(grad, torch.Tensor) or not grad.is_floating_point():
        raise TypeError(f"grad must be a floating tensor, got {type(grad).__name__}")
    core_dims = check_count(core_dims, "core_dims", 1)
    if core_dims > grad.ndim:
        raise ValueError(f"core_dims={core_dims} exceeds grad's {grad.ndim} dimensions")
    eps = check_positive(eps, "eps", allow_zero=True)
    if not bool(torch.isfinite(grad).all()):
        raise ValueError("grad contains NaN or inf")
    return _block_normalize(grad, core_dims, eps)


def _block_normalize(grad: torch.Tensor, core_dims: int, eps: float = 0.0, q: float = 2.0) -> torch.Tensor:
    """:func:`block_normalize` on arguments already checked (the training loop's version); ``q``:
    the entrywise norm divided by (2: Frobenius; mirror descent's dual step uses ``p / (p - 1)``).
    (A block of several dimensions is reduced in row-major order, as if flattened.)"""
    if core_dims > 1:
        grad = grad.contiguous()
    dims = _DIMS[core_dims] if core_dims < len(_DIMS) else tuple(range(-core_dims, 0))
    top = torch.linalg.vector_norm(grad, math.inf, dims, keepdim=True)     # the largest |entry|
    positive = top > 0
    every = bool(positive) if positive.numel() == 1 else bool(positive.all())
    safe = top if every else torch.where(positive, top, 1.0)
    scaled = grad / safe
    norm = torch.linalg.vector_norm(scaled, ord=q, dim=dims, keepdim=True)
    if eps:                  # (a scalar over a subnormal divides by multiplying with 1/x = inf)
        norm = norm + eps / safe
    if torch.is_grad_enabled() and scaled.requires_grad:
        scaled = scaled / norm            # (autograd keeps ``scaled`` for the norm's backward)
    else:
        scaled.div_(norm)                 # the training loop: no graph, no new array
    return scaled if every else torch.where(positive, scaled, 0.0)


_DIMS = [(), (-1,), (-2, -1), (-3, -2, -1)]


def _expand(per_trial: torch.Tensor, core_dims: int) -> torch.Tensor:
    return per_trial.reshape(*per_trial.shape, *([1] * core_dims))


def _length(updates: list[torch.Tensor], core: tuple[int, ...]) -> torch.Tensor:
    """The length of the whole update per trial (all blocks), without overflow or underflow."""
    tops = [u.abs().flatten(u.ndim - k).amax(dim=-1) for u, k in zip(updates, core)]
    top = torch.stack(torch.broadcast_tensors(*tops)).amax(dim=0)
    safe = torch.where(top > 0, top, torch.ones_like(top))
    squares = sum((u / _expand(safe, k)).flatten(u.ndim - k).square().sum(-1)
                  for u, k in zip(updates, core))
    return safe * squares.sqrt()


def _polyak(grads: list[torch.Tensor], core: tuple[int, ...], excess: torch.Tensor,
            lr: float, max_step: float | None) -> list[torch.Tensor]:
    """``lr * (L - L*) / ||g||^2 * g`` per trial, with ``||g||`` over all blocks, as a length
    ``lr (L - L*) / ||g||`` (capped at ``max_step``) times the unit direction ``g / ||g||``, so
    that a vanishing gradient gives a long step, never inf * 0 (0 where g = 0)."""
    norm = _length(grads, core)
    positive = norm > 0
    safe = torch.where(positive, norm, torch.ones_like(norm))
    length = torch.where(positive, lr * excess.clamp(min=0) / safe, torch.zeros_like(norm))
    if max_step is not None:
        length = length.clamp(max=max_step)
    top = torch.stack(torch.broadcast_tensors(
        *[g.abs().flatten(g.ndim - k).amax(dim=-1) for g, k in zip(grads, core)])).amax(dim=0)
    top = torch.where(top > 0, top, torch.ones_like(top))
    scale = torch.where(positive, length / (safe / top), torch.zeros_like(norm))
    return [_expand(scale, k) * (g / _expand(top, k)) for g, k in zip(grads, core)]


def _to_dual(theta: torch.Tensor, p: float) -> torch.Tensor:
    """The mirror map ``grad psi(theta) = sign(theta) |theta|^(p - 1)``."""
    return (torch.sign(theta) * theta.abs().pow(p - 1)).detach().clone()


def _from_dual(u: torch.Tensor, p: float) -> torch.Tensor:
    """Its inverse ``sign(u) |u|^(1 / (p - 1))``."""
    return torch.sign(u) * u.abs().pow(1 / (p - 1))


def _polar(grad: torch.Tensor) -> torch.Tensor:
    """``U V^T`` for ``grad = U S V^T`` (batched), keeping only singular values above 1e-12 of
    the largest (the sign of a zero singular value is 0); computed on the gradient divided by its
    largest entry, so that tiny exact gradients do not underflow."""
    top = grad.abs().flatten(-2).amax(-1)[..., None, None]
    scaled = grad / torch.where(top > 0, top, torch.ones_like(top))
    U, S, Vh = torch.linalg.svd(scaled, full_matrices=False)
    keep = (S > 1e-12 * S[..., :1]).to(grad.dtype)
    return (U * keep.unsqueeze(-2)) @ Vh
