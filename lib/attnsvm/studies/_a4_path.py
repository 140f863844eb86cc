"""The batched program behind experiment A4 (:mod:`attnsvm.studies.a4`): normalized gradient descent on
``W`` (the step of :func:`attnsvm.model.train.train` with ``method="ngd"``, logistic loss, fixed linear
head; the reproduction report, the common protocol), run on the logits of many instances at
once, recording the softmax probabilities at several step budgets."""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import Callable, Dict, List, Sequence

import torch

from ..model.train import TrainingError


def _ngd_logit_steps(Xl: torch.Tensor, ZZ: torch.Tensor, c: torch.Tensor, negY: torch.Tensor,
                     a: torch.Tensor, budgets: List[int], lr: float) -> Dict[int, torch.Tensor]:
    """The loop of :func:`ngd_logit_path` on the batch-last layout (``Xl (n, T, d, B)``,
    ``ZZ (n, n, 1, B)``, ``c (n, T, B)``, ``negY (n, 1, B)``, logits ``a (n, T, B)``, changed in
    place): ``{budget: softmax probabilities (n, T, B)}``."""
    path: Dict[int, torch.Tensor] = {}
    last = max(budgets)
    for step in range(last + 1):
        if step in budgets:
            path[step] = torch.softmax(a, 1)
        if step == last:
            break
        top_logit, top = a.max(1, keepdim=True)
        p = (a - top_logit).exp_()
        p /= p.sum(1, keepdim=True)
        c_top = c.gather(1, top)
        centred = c - c_top                                          # c_t - c_top
        mix = (p * centred).sum(1, keepdim=True)
        outer = torch.sigmoid((c_top + mix).mul_(negY)).mul_(negY)    # loss'(Y f) Y
        G = (centred - mix).mul_(p).mul_(outer)
        G /= G.abs().amax((0, 1)).clamp_(min=1e-300)
        GX = (G.unsqueeze(2) * Xl).sum(1)                            # sum_t G_it x_it, (n, d, B)
        KG = (Xl * (ZZ * GX.unsqueeze(0)).sum(1).unsqueeze(1)).sum(2)   # (K G)_jt, (n, T, B)
        a -= KG.mul_((G * KG).sum((0, 1)).clamp_(min=1e-300).sqrt_().reciprocal_().mul_(lr))
    return path


@lru_cache(maxsize=1)
def _compiled_steps() -> Callable:
    """:func:`_ngd_logit_steps` compiled by TorchScript, once, on first use (not at import): the
    same ATen kernels in the same order (so the same numbers, bit for bit), without Python's
    overhead on each of the loop's many small operations. Where TorchScript is unavailable (it is
    deprecated in recent PyTorch), the plain function."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.script(_ngd_logit_steps)
    except Exception:                            # noqa: BLE001 (no TorchScript: the plain loop, same numbers)
        return _ngd_logit_steps


def ngd_logit_path(X: torch.Tensor, Z: torch.Tensor, Y: torch.Tensor, values: torch.Tensor,
                   logits: torch.Tensor, budgets: Sequence[int], lr: float) -> dict[int, torch.Tensor]:
    """Normalized GD on ``W`` (logistic loss, fixed linear head; the step of :func:`attnsvm.model.train.train` with
    ``method="ngd"``), run on the logits ``a_it = x_it^T W z_i`` of a batch ``X (B, n, T, d)``,
    ``Z (B, n, d)``, labels ``Y (B, n)`` and token values ``c_it = v^T x_it``; returns the softmax
    probabilities after each number of steps in ``budgets``.

    With ``G_it = dL/da_it`` (the re-centred closed form of :mod:`attnsvm.model.gradients`, accurate
    however saturated the softmax), the gradient is ``g = sum_it G_it x_it z_i^T`` and the step
    ``W <- W - lr g / ||g||_F`` moves the logits by ``-lr (K G) / sqrt(G^T K G)`` with the kernel
    ``K_(it),(js) = (x_it . x_js)(z_i . z_j)``, applied as ``K G = X (Z Z^T) (sum_t G_t x_t)``.
    ``G`` is divided by its largest entry first, so that saturated gradients (1e-200) do not
    underflow in ``G^T K G``. The batch is laid out last, so every operation runs over it at once;
    the loop runs in inference mode (no autograd bookkeeping) and, where available, as TorchScript
    run as written (no graph optimizations), and the returned probabilities are ordinary tensors.
    """
    with torch.inference_mode():                 # no autograd graph: the gradient is in closed form
        Xl = X.detach().permute(1, 2, 3, 0).contiguous()                 # (n, T, d, B)
        Zd = Z.detach()
        ZZ = (Zd @ Zd.transpose(-1, -2)).permute(1, 2, 0).unsqueeze(2).contiguous()   # (n, n, 1, B)
        c = values.detach().permute(1, 2, 0).contiguous()                # (n, T, B)
        negY = (-Y.detach()).T.unsqueeze(1).contiguous()                 # (n, 1, B)
        a = logits.detach().permute(1, 2, 0).clone(memory_format=torch.contiguous_format)  # (a copy)
        with torch.jit.optimized_execution(False):
            path = _compiled_steps()(Xl, ZZ, c, negY, a, [int(b) for b in budgets], float(lr))
    # copies made outside inference mode: ordinary tensors, laid out (B, n, T)
    out = {step: p.permute(2, 0, 1).clone(memory_format=torch.contiguous_format) for step, p in path.items()}
    if not all(bool(torch.isfinite(p).all()) for p in out.values()):
        raise TrainingError("normalized GD produced NaN/inf probabilities; check the data")
    return out
