"""The regularization path (paper A Theorems 1-2, paper B Theorem 1; THEORY.md section 3).

``W_R = argmin_{||W||_F <= R} L(W)`` for the W (and p) parameterization, and
``(K_R, Q_R) = argmin_{||K||_F^2 + ||Q||_F^2 <= 2R} L(K, Q)`` for the factored one, computed for a
grid of radii, warm-started from one radius to the next and batched over trials.

Each constrained problem is solved by projected *normalized* gradient steps with a per-trial step
length that grows by 1.2 while consecutive moves agree and halves when they reverse. Normalizing
matters: at large R the loss gradient is exponentially small but, computed re-centred, accurate,
and its direction is what the projection needs. An optional cone ``corr(W, D) >= 1 - mu`` restricts
the path to a neighbourhood of a direction ``D`` (the *local* regularization path).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .data import Problem
from .gradients import risk_and_gradients, supports
from .metrics import corr
from .models import (Attention, Head, KQAttention, check_compatible, check_head, check_loss,
                     empirical_risk)


@dataclass
class PathResult:
    """The path: ``iterates[k]`` is the combined parameter (``W_R`` or ``K_R Q_R^T``) at ``radii[k]``.

    ``tangential`` is ``sin`` of the angle between the gradient and the radial direction at the
    last iterate: the first-order optimality residual on the sphere (0 = KKT point of the ball
    problem with the constraint active; 1 = the iterate is inside the ball; NaN = the gradient
    underflowed to exactly 0, logit gaps beyond ~745, where no float64 step can move).
    """

    radii: torch.Tensor
    iterates: torch.Tensor
    loss: torch.Tensor
    tangential: torch.Tensor


def _ball_radius(attention: Attention, R: float) -> float:
    """Radius of the Euclidean ball in parameter space: R, or sqrt(2R) for (K, Q)."""
    return (2 * R) ** 0.5 if isinstance(attention, KQAttention) else R


def _joint_norm(tensors: list[torch.Tensor], core: list[int]) -> torch.Tensor:
    squares = [t.flatten(t.ndim - k).pow(2).sum(-1) for t, k in zip(tensors, core)]
    return torch.stack(squares).sum(0).sqrt()


def _expand(per_trial: torch.Tensor, k: int) -> torch.Tensor:
    return per_trial.reshape(*per_trial.shape, *([1] * k))


def _project_cone(W: torch.Tensor, direction: torch.Tensor, cos_min: float, k: int) -> torch.Tensor:
    """Rotate ``W`` (norm kept) towards ``direction`` until ``corr(W, direction) >= cos_min``."""
    batch = W.ndim - k
    unit_d = direction / _expand(direction.flatten(direction.ndim - k).norm(dim=-1), k)
    unit_d = unit_d.expand_as(W)
    norm = W.flatten(batch).norm(dim=-1)
    c = corr(W, unit_d, batch)
    perp = W - _expand((W * unit_d).flatten(batch).sum(-1), k) * unit_d
    perp = perp / _expand(perp.flatten(batch).norm(dim=-1).clamp_min(1e-300), k)
    sin_min = (1 - cos_min ** 2) ** 0.5
    rotated = _expand(norm, k) * (cos_min * unit_d + sin_min * perp)
    return torch.where(_expand(c < cos_min, k), rotated, W)


def _search_direction(params: list[torch.Tensor], grads: list[torch.Tensor], core: list[int],
                      rho: float, sphere: bool) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Unit search direction per trial: the tangential gradient where the ball constraint binds
    (on the sphere, loss decreasing outwards; always when ``sphere``), the full gradient
    elsewhere; plus sin(angle between gradient and radius). Gradients are first divided by their
    largest entry: once the softmax saturates they are exact but tiny (1e-200), and squaring them
    would underflow."""
    top = torch.stack([g.abs().flatten(g.ndim - k).amax(-1) for g, k in zip(grads, core)]).amax(0)
    top = torch.where(top > 0, top, torch.ones_like(top))
    grads = [g / _expand(top, k) for g, k in zip(grads, core)]
    inner = sum((p * g).flatten(p.ndim - k).sum(-1) for p, g, k in zip(params, grads, core))
    pnorm, gnorm = _joint_norm(params, core), _joint_norm(grads, core).clamp_min(1e-300)
    binding = (pnorm >= rho * (1 - 1e-9)) & (inner < 0)
    if sphere:
        binding = torch.ones_like(binding)
    radial = inner / pnorm.square()
    tangent = [g - _expand(radial, k) * p for p, g, k in zip(params, grads, core)]
    tnorm = _joint_norm(tangent, core).clamp_min(1e-300)
    direction = [torch.where(_expand(binding, k), t / _expand(tnorm, k), g / _expand(gnorm, k))
                 for t, g, k in zip(tangent, grads, core)]
    residual = torch.where(binding, tnorm / gnorm, torch.ones_like(gnorm))
    return direction, torch.where(inner.abs() + gnorm > 1e-300, residual, torch.nan)


def regularization_path(attention: Attention, problem: Problem, radii, *, steps: int = 300,
                        head: Head | None = None, loss: str = "logistic",
                        cone: tuple[torch.Tensor, float] | None = None, sphere: bool = False,
                        initial_step: float = 0.05) -> PathResult:
    """Minimize the loss over growing norm balls; ``attention`` gives the start and is updated.

    Args:
        attention: ``WAttention``/``PromptAttention`` (ball ``||W||_F <= R``) or ``KQAttention``
            (ball ``||K||^2 + ||Q||^2 <= 2R``); its current value warm-starts the first radius.
            For (K, Q), start at a radius where the loss already saturates (R ~ 100 on unit-norm
            data): warm-started through small radii, K Q^T becomes rank one there and a
            first-order method may not leave that rank-deficient saddle.
        radii: increasing radii ``R``.
        steps: projected steps per radius.
        cone: ``(D, mu)`` restricts W to ``corr(W, D) >= 1 - mu`` (W/p parameterizations only).
        sphere: minimize over the sphere ``||W|| = R`` instead of the ball. With a cone this is the
            local path of paper A (its cone also bounds the norm from below, ``||W|| >= R_0``).
        initial_step: first step length as a fraction of the ball radius.
    """
    radii = torch.as_tensor(radii, dtype=torch.float64)
    if radii.ndim != 1 or len(radii) == 0 or bool((radii <= 0).any()) or bool((radii.diff() < 0).any()):
        raise ValueError("radii must be a non-empty increasing sequence of positive numbers")
    if cone is not None:
        if isinstance(attention, KQAttention):
            raise ValueError("the cone constraint is defined for the W and p parameterizations")
        core = attention.core_dims[0]
        direction, mu = torch.as_tensor(cone[0]), float(cone[1])
        if tuple(direction.shape[-core:]) != tuple(attention.params[0].shape[-core:]):
            raise ValueError(f"the cone's direction has shape {tuple(direction.shape)}, the "
                             f"parameter {tuple(attention.params[0].shape)}")
        if not 0 < mu <= 2:
            raise ValueError(f"the cone's mu must lie in (0, 2] (corr >= 1 - mu), got {mu}")
    check_loss(loss)
    check_compatible(attention, problem)
    check_head(head, problem)
    params, core = attention.params, attention.core_dims
    closed_form = head is None and supports(attention)
    values = problem.scores * problem.Y.unsqueeze(-1) if closed_form else None
    out: dict[str, list[torch.Tensor]] = {"W": [], "loss": [], "tangential": []}
    for R in radii.tolist():
        rho = _ball_radius(attention, R)
        with torch.no_grad():                     # warm start: rescale onto the new sphere
            norm = _joint_norm(params, core)
            if bool((norm == 0).any()):
                raise ValueError("the path needs a nonzero starting point (e.g. a small random W)")
            for p, k in zip(params, core):
                p *= _expand(rho / norm, k)
        step = torch.full_like(norm, initial_step * rho)
        previous = [torch.zeros_like(p) for p in params]
        for _ in range(steps):
            if closed_form:
                grads = risk_and_gradients(attention, problem, loss, values)[2]
            else:
                grads = torch.autograd.grad(empirical_risk(attention, problem, head, loss).sum(),
                                            params)
            with torch.no_grad():
                direction, tangential = _search_direction(params, list(grads), core, rho, sphere)
                moves = [p - _expand(step, k) * g for p, g, k in zip(params, direction, core)]
                excess = _joint_norm(moves, core) / rho
                excess = excess if sphere else excess.clamp_min(1.0)
                moves = [m / _expand(excess, k) for m, k in zip(moves, core)]
                if cone is not None:
                    moves[0] = _project_cone(moves[0], cone[0].to(moves[0]), 1 - cone[1], core[0])
                deltas = [m - p for m, p in zip(moves, params)]
                agree = sum((a * b).flatten(a.ndim - k).sum(-1)
                            for a, b, k in zip(deltas, previous, core))
                step = torch.where(agree < 0, step * 0.5, torch.clamp(step * 1.2, max=0.5 * rho))
                for p, m in zip(params, moves):
                    p.copy_(m)
                previous = deltas
        with torch.no_grad():
            out["W"].append(attention.combined().clone())
            out["loss"].append(empirical_risk(attention, problem, head, loss))
            out["tangential"].append(tangential)
    return PathResult(radii=radii, iterates=torch.stack(out["W"]), loss=torch.stack(out["loss"]),
                      tangential=torch.stack(out["tangential"]))
