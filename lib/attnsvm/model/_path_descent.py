"""The solver of one ball problem of the regularization path (:mod:`attnsvm.model.path`): projected
normalized-gradient steps of Barzilai-Borwein length, accepted by a non-monotone test on the
loss compared through its cancellation-free excess (``gradients.no_worse``), optionally inside
a cone around a direction (the local path), batched over trials.
"""

from __future__ import annotations

import torch

from .data import Problem
from .gradients import Evaluation, FixedTerms, evaluate, no_worse, risk_and_gradients, supports
from .heads import Head, LinearHead, empirical_risk
from .metrics import corr
from .models import Attention, KQAttention
from ._path_setup import _expand, _joint_norm


MEMORY = 10          # accepted losses the non-monotone step test looks back on
RESTART_AFTER = 4 * MEMORY   # steps without a new best point before a trial restarts from it


def _ball_radius(attention: Attention, R: float) -> float:
    """Radius of the Euclidean ball in parameter space: R, or sqrt(2R) for (K, Q)."""
    return (2 * R) ** 0.5 if isinstance(attention, KQAttention) else R


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
                      rho: float, sphere: bool, cone: tuple[torch.Tensor, float] | None = None
                      ) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Search direction per trial, the gradient divided by its norm: where the ball constraint
    binds (on the sphere, loss decreasing outwards; always when ``sphere``) only its part tangent
    to the sphere, and, on the boundary of a ``cone``, also without the part that points out of
    the cone; the whole unit gradient elsewhere. Its length is the first-order optimality
    residual (0 at a KKT point of the constrained problem; 1 inside the ball), returned too.
    Gradients are first divided by their largest entry: once the softmax saturates they are
    exact but tiny (1e-200), and squaring them would underflow."""
    tops = [g.abs().flatten(g.ndim - k).amax(-1) for g, k in zip(grads, core)]
    top = tops[0] if len(tops) == 1 else torch.stack(tops).amax(0)
    top = torch.where(top > 0, top, 1.0)
    grads = [g / _expand(top, k) for g, k in zip(grads, core)]
    inner = sum((p * g).flatten(p.ndim - k).sum(-1) for p, g, k in zip(params, grads, core))
    pnorm, gnorm = _joint_norm(params, core), _joint_norm(grads, core).clamp_min(1e-300)
    binding = (pnorm >= rho * (1 - 1e-9)) & (inner < 0)
    if sphere:
        binding = torch.ones_like(binding)
    radial = inner / pnorm.square()
    direction = [torch.where(_expand(binding, k), g - _expand(radial, k) * p, g) / _expand(gnorm, k)
                 for p, g, k in zip(params, grads, core)]
    if cone is not None:                     # W only: params[0]; the normal points into the cone
        W, k = params[0], core[0]
        unit_d = cone[0] / _expand(cone[0].flatten(cone[0].ndim - k).norm(dim=-1), k)
        inward = unit_d - _expand((unit_d * W).flatten(W.ndim - k).sum(-1) / pnorm.square(), k) * W
        inward = inward / _expand(_joint_norm([inward], [k]).clamp_min(1e-300), k)
        on_edge = corr(W, unit_d.expand_as(W), W.ndim - k) <= 1 - cone[1] + 1e-9
        leaving = (direction[0] * inward).flatten(W.ndim - k).sum(-1)   # -step * u leaves if > 0
        cut = on_edge & binding & (leaving > 0)
        direction[0] = direction[0] - _expand(torch.where(cut, leaving, 0.0), k) * inward
    residual = torch.where(binding, _joint_norm(direction, core), 1.0)
    return direction, torch.where(inner.abs() + gnorm > 1e-300, residual, torch.nan)


def _evaluate(attention: Attention, problem: Problem, head: Head | None, loss: str,
              fixed: FixedTerms | None) -> Evaluation:
    """Risk and gradients, closed form for the problem's linear head (``fixed`` given, from
    :func:`gradients.fixed_terms`; the problem and parameters were checked on entry to the path),
    autograd otherwise; without the closed form, points are compared by their risk alone."""
    if fixed is not None:
        return evaluate(attention, problem, loss, fixed)
    risk = empirical_risk(attention, problem, head, loss)
    grads = list(torch.autograd.grad(risk.sum(), attention.params))
    if isinstance(head, LinearHead) and not head.params and supports(attention):
        exact = risk_and_gradients(attention, problem, loss)     # same risk: compare it exactly
        return exact._replace(risk=risk.detach(), grads=grads)
    return _risk_only(risk.detach(), problem, grads)


class _Recent:
    """The scores (risk, top tokens, excess) of the last ``MEMORY`` accepted points, and the
    non-monotone test against the largest of them.

    The largest is the fold ``worst = other if no_worse(worst, other) else worst`` over the window,
    oldest first (ties go to the newer point). ``no_worse`` allows rounding, so it need not be
    transitive, and the fold is kept exactly: ``worst[s]`` is the slot of the fold over the
    entries from the one in slot ``s`` on, for every slot of the window, so that appending an
    entry advances every fold by one comparison, and dropping the oldest entry leaves the fold of
    the next one. The entries live in a ring of ``MEMORY`` slots (entry ``k`` in slot
    ``k % MEMORY``), written in place."""

    def __init__(self, first: Evaluation):
        self.risk = first.risk.expand(MEMORY, *first.risk.shape).clone()    # (slots, *trials)
        self.top = first.top.expand(MEMORY, *first.top.shape).clone()       # (slots, *trials, n)
        self.excess = first.excess.expand(MEMORY, *first.excess.shape).clone()
        slots = torch.arange(MEMORY, device=first.risk.device)
        self.worst = slots.reshape(MEMORY, *(1,) * first.risk.ndim).expand_as(self.risk).clone()
        self.count = 1                                                       # entries pushed

    def no_worse_than_worst(self, trial: Evaluation, also: Evaluation | None = None) -> torch.Tensor:
        """Per trial, ``no_worse(trial, worst)`` for the fold's ``worst`` over the whole window;
        with ``also``, stacked with ``no_worse(trial, also)`` (shape ``(2, *trials)``: one
        comparison for both)."""
        oldest = self.count % MEMORY if self.count >= MEMORY else 0
        index = self.worst[oldest].unsqueeze(0)
        risk, excess = self.risk.gather(0, index), self.excess.gather(0, index)
        top = self.top.gather(0, index.unsqueeze(-1).expand(1, *self.top.shape[1:]))
        if also is None:
            return no_worse(trial, Evaluation(risk[0], torch.empty(0), [], top[0], excess[0]))
        return no_worse(trial, Evaluation(torch.cat([risk, also.risk.unsqueeze(0)]), torch.empty(0), [],
                                          torch.cat([top, also.top.unsqueeze(0)]),
                                          torch.cat([excess, also.excess.unsqueeze(0)])))

    def push(self, score: Evaluation) -> None:
        """Append ``score`` (overwriting the oldest entry once the window holds ``MEMORY``)."""
        slot = self.count % MEMORY
        stacked = Evaluation(self.risk, torch.empty(0), [], self.top, self.excess)
        replaced = no_worse(stacked, score).gather(0, self.worst)   # no_worse(worst, new)
        self.worst = torch.where(replaced, slot, self.worst)        # the slots of valid folds hold
        self.worst[slot] = slot                                     # no entry older than theirs
        self.risk[slot] = score.risk
        self.top[slot] = score.top
        self.excess[slot] = score.excess
        self.count += 1

    def reset(self, mask: torch.Tensor, score: Evaluation) -> None:
        """Where ``mask``, forget the window: every slot holds ``score`` (as at the first point,
        each fold its own slot), so the next accepted step must be no worse than ``score``."""
        held = mask.unsqueeze(0)
        self.risk = torch.where(held, score.risk.unsqueeze(0), self.risk)
        self.top = torch.where(held.unsqueeze(-1), score.top.unsqueeze(0), self.top)
        self.excess = torch.where(held, score.excess.unsqueeze(0), self.excess)
        slots = torch.arange(MEMORY, device=mask.device).reshape(MEMORY, *(1,) * mask.ndim)
        self.worst = torch.where(held, slots, self.worst)


def _choose(mask: torch.Tensor, a: Evaluation, b: Evaluation) -> Evaluation:
    """Per trial, the score (risk, top tokens, excess; no gradients) of ``a`` where ``mask``, else
    of ``b``."""
    return Evaluation(torch.where(mask, a.risk, b.risk), torch.empty(0), [],
                      torch.where(mask.unsqueeze(-1), a.top, b.top),
                      torch.where(mask, a.excess, b.excess))


def _descend(attention: Attention, evaluate, best: Evaluation, accepted: list[torch.Tensor],
             rho: float, steps: int, initial_step: float, tol: float, sphere: bool,
             cone: tuple[torch.Tensor, float] | None) -> tuple[Evaluation, torch.Tensor]:
    """Projected descent at one radius from ``accepted`` (evaluated as ``best``), per trial;
    leaves ``attention`` at the best point seen and returns its score (an evaluation without
    gradients or probabilities) and residual."""
    params, core = attention.params, attention.core_dims
    with torch.no_grad():
        for p, a in zip(params, accepted):
            p.copy_(a)
        direction, tangential = _search_direction(params, best.grads, core, rho, sphere, cone)
    step = torch.full_like(tangential, initial_step * rho)
    # Non-monotone test (Grippo, Lampariello and Lucidi 1986): a step is accepted when its loss
    # is no larger than the largest of the last MEMORY accepted ones, which lets Barzilai-
    # Borwein steps cross curved valleys; the best point seen is what the radius returns.
    # A non-monotone test alone lets the steps settle into a cycle of accepted points, none
    # better than the best one (measured on paper A's A2 instance at R = 10.8 ||W^mm||: a 4-cycle,
    # residual 0.84, for any number of steps, entered or not depending on the BLAS kernel's
    # rounding). So a trial whose best point has not improved for RESTART_AFTER steps restarts
    # from it: its direction there, the step proposed there (a quarter of it at every further
    # restart without progress, so a step too long for the valley cannot repeat forever) and a
    # window holding only that point, so that the next accepted step improves on it. (With 20
    # steps, legitimate non-monotone stretches were cut short: 1 of 1,390 radii of small random
    # instances lost its convergence; with 40, none of 2,320 did, W, restarts and cone paths.)
    best = Evaluation(best.risk, torch.empty(0), [], best.top, best.excess)
    current, recent = best, _Recent(best)
    kept, kept_tangential = list(accepted), tangential      # rebound below, never written to
    kept_direction, kept_step = list(direction), step
    stale = torch.zeros(step.shape, dtype=torch.long, device=step.device)  # steps since best
    for _ in range(steps):
        active = ~(kept_tangential <= 0.1 * tol)        # a trial stops once well converged
        if not bool(active.any()):
            break
        with torch.no_grad():
            length = torch.where(active, step, 0.0)
            moves = [a - _expand(length, k) * u for a, u, k in zip(accepted, direction, core)]
            excess = _joint_norm(moves, core) / rho
            excess = excess if sphere else excess.clamp_min(1.0)
            moves = [m / _expand(excess, k) for m, k in zip(moves, core)]
            if cone is not None:
                moves[0] = _project_cone(moves[0], cone[0], 1 - cone[1], core[0])
            for p, m in zip(params, moves):
                p.copy_(m)
        trial = evaluate()
        with torch.no_grad():
            versus = recent.no_worse_than_worst(trial, best)      # the window's worst, and best
            accept = versus[0] & active
            improved = accept & versus[1]
            new_direction, new_tangential = _search_direction(params, trial.grads, core, rho,
                                                              sphere, cone)
            # Barzilai-Borwein length from the accepted move; halve after a rejection
            s_k = [m - a for m, a in zip(moves, accepted)]
            y_k = [u - v for u, v in zip(new_direction, direction)]
            sy = sum((a * b).flatten(a.ndim - k).sum(-1) for a, b, k in zip(s_k, y_k, core))
            ss = sum(a.flatten(a.ndim - k).pow(2).sum(-1) for a, k in zip(s_k, core))
            bb = torch.where(sy > 0, ss / sy.clamp_min(1e-300), 2 * step)
            step = torch.where(accept, bb.clamp(max=0.5 * rho), 0.5 * step)
            current = _choose(accept, trial, current)
            recent.push(current)
            best = _choose(improved, trial, best)
            kept_tangential = torch.where(improved, new_tangential, kept_tangential)
            on_accept = [_expand(accept, k) for k in core]
            on_improve = [_expand(improved, k) for k in core]
            kept = [torch.where(i, p, b) for p, b, i in zip(params, kept, on_improve)]
            accepted = [torch.where(i, p, a) for p, a, i in zip(params, accepted, on_accept)]
            direction = [torch.where(i, v, u) for u, v, i in zip(direction, new_direction, on_accept)]
            kept_direction = [torch.where(i, v, u)
                              for u, v, i in zip(kept_direction, new_direction, on_improve)]
            kept_step = torch.where(improved, step, kept_step)
            stale = torch.where(improved, 0, stale + 1)
            restart = active & (stale >= RESTART_AFTER)
            if bool(restart.any()):
                on_restart = [_expand(restart, k) for k in core]
                accepted = [torch.where(i, b, a) for b, a, i in zip(kept, accepted, on_restart)]
                direction = [torch.where(i, v, u)
                             for u, v, i in zip(direction, kept_direction, on_restart)]
                step = torch.where(restart, kept_step, step)
                kept_step = torch.where(restart, 0.25 * kept_step, kept_step)
                current = _choose(restart, best, current)
                recent.reset(restart, best)
                stale = torch.where(restart, 0, stale)
    with torch.no_grad():
        for p, b in zip(params, kept):
            p.copy_(b)
    return best, kept_tangential


def _pick(evaluation: Evaluation, index: int) -> Evaluation:
    """Entry ``index`` of the leading (starts) dimension of a batched evaluation."""
    probs = evaluation.probs if not evaluation.probs.numel() else evaluation.probs[index]  # a head's:
    return Evaluation(evaluation.risk[index], probs,                                    # none kept
                      [g[index] for g in evaluation.grads], evaluation.top[index],
                      evaluation.excess[index])


def _risk_only(risk: torch.Tensor, problem: Problem, grads: list[torch.Tensor]) -> Evaluation:
    """An evaluation compared by its risk alone (a head without a cancellation-free excess)."""
    top = torch.full((*risk.shape, problem.n), -1, dtype=torch.long, device=risk.device)
    return Evaluation(risk, torch.empty(0), grads, top, risk)


def _select(mask: torch.Tensor, a: Evaluation, b: Evaluation) -> Evaluation:
    """Per trial, ``a`` where ``mask`` else ``b`` (gradients included)."""
    def pick(x, y):
        return torch.where(mask.reshape(tuple(mask.shape) + (1,) * (x.ndim - mask.ndim)), x, y)
    return Evaluation(pick(a.risk, b.risk), b.probs, [pick(x, y) for x, y in zip(a.grads, b.grads)],
                      pick(a.top, b.top), pick(a.excess, b.excess))
