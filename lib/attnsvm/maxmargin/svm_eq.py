"""The authors' SVM-eq prediction ``W_k ~ W_fin + C_k W_dir`` for several selected tokens per
example (paper A, nonlinear heads; book page 'What is proved where', a conjecture): ``C_k`` fitted to an iterate
by least squares, as in the authors' experiment code. ``W_fin`` and ``W_dir`` come from
:mod:`attnsvm.maxmargin.gensvm` (the finite part and the Gen-SVM direction).
"""

from __future__ import annotations

import numpy as np
import torch

from ..model.utils import as_tensor


def svm_eq_fit(W, W_fin, W_dir) -> tuple[float, torch.Tensor]:
    """The authors' SVM-eq prediction for an iterate ``W``: ``C`` minimising
    ``||W - W_fin - C W_dir||_F`` (least squares) and ``W_fin + C W_dir``. Batched over leading
    dimensions of ``W`` (then ``C`` is a tensor)."""
    W, W_fin, W_dir = (as_tensor(value, name, dtype=torch.float64)
                       for name, value in (("W", W), ("W_fin", W_fin), ("W_dir", W_dir)))
    for name, value in (("W", W), ("W_fin", W_fin), ("W_dir", W_dir)):
        if value.numel() == 0:
            raise ValueError(f"{name} has shape {tuple(value.shape)}, with no entry: pass (d, d) "
                             "matrices, d >= 1 (an iterate W, and W_fin and W_dir from "
                             "finite_part and gen_svm)")
    if W.ndim < 2 or W.shape[-2:] != W_fin.shape[-2:] or W_fin.shape[-2:] != W_dir.shape[-2:]:
        raise ValueError(f"W, W_fin and W_dir must be matrices sharing their last two dimensions, "
                         f"got {tuple(W.shape)}, {tuple(W_fin.shape)}, {tuple(W_dir.shape)}")
    try:                              # NumPy's shape rule (torch's takes ~0.5 ms a call)
        np.broadcast_shapes(tuple(W.shape), tuple(W_fin.shape), tuple(W_dir.shape))
    except ValueError:
        raise ValueError(f"the leading (batch) dimensions of W {tuple(W.shape)}, W_fin "
                         f"{tuple(W_fin.shape)} and W_dir {tuple(W_dir.shape)} do not broadcast") from None
    # Powers of two (exact) keep squares and differences of 1e300 entries in range.
    s_dir = _pow2(W_dir.abs().amax((-2, -1)))[..., None, None]
    s_res = _pow2(torch.maximum(W.abs().amax((-2, -1)), W_fin.abs().amax((-2, -1))))[..., None, None]
    D = W_dir * s_dir
    squared = (D * D).sum((-2, -1))
    if not bool((squared > 0).all()):
        raise ValueError("W_dir must be a nonzero direction (a Gen-SVM solution)")
    R = W * s_res - W_fin * s_res
    C = (R * D).sum((-2, -1)) / squared * (s_dir / s_res)[..., 0, 0]
    prediction = W_fin + C[..., None, None] * W_dir
    if not (bool(torch.isfinite(C).all()) and bool(torch.isfinite(prediction).all())):
        raise ValueError("the fitted C W_dir overflows float64: W is ~1e308 times W_dir; rescale "
                         "W_dir (the fit is linear in it)")
    return (float(C) if C.ndim == 0 else C), prediction


def _pow2(top: torch.Tensor) -> torch.Tensor:
    """Per entry, a power of two bringing ``top`` (> 0) into [0.5, 1) (1 where ``top`` is 0)."""
    exponent = torch.frexp(torch.where(top > 0, top, torch.ones_like(top))).exponent
    return torch.where(top > 0, torch.pow(2.0, -exponent.to(torch.float64)), torch.ones_like(top))
