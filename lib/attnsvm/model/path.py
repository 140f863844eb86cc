"""The regularization path (paper A, regularization paths of W and of (K, Q); paper B, of p;
book page 'What is proved where').

``W_R = argmin_{||W||_F <= R} L(W)`` for the W (and p) parameterization, and
``(K_R, Q_R) = argmin_{||K||_F^2 + ||Q||_F^2 <= 2R} L(K, Q)`` for the factored one, computed for a
grid of radii, warm-started from one radius to the next and batched over trials.

Each constrained problem is solved (:mod:`attnsvm.model._path_descent`) by projected gradient steps along
the gradient divided by its norm (at large R the gradient is exponentially small but, computed
re-centred, accurate), of Barzilai-Borwein length, accepted by a non-monotone test on the loss. At large R the losses of two
points agree to every float64 digit, so they are compared through their cancellation-free excess
over the top tokens' loss (``gradients.no_worse``). The first-order residual ``tangential`` and,
given a reference direction, a comparison with its scaled copy, tell a converged path from one
that is not (:attr:`PathResult.converged`, :class:`PathWarning`). An optional cone
``corr(W, D) >= 1 - mu`` restricts the path to a neighbourhood of ``D`` (the local path).

What is computed is not certified to be the argmin: a converged point is a certified stationary
point of the ball problem and the best of the starts tried at its radius (the previous point, its
rescaling, the reference, ``restarts`` random starts); :attr:`PathResult.start` records which start
won and :meth:`PathResult.provenance` says it in one sentence.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass

import torch

from .data import Problem
from .gradients import fixed_terms, no_worse, supports
from .heads import Head, check_compatible, check_head, check_loss
from .metrics import corr
from .models import Attention
from ._path_descent import (_ball_radius, _descend, _evaluate, _pick, _project_cone,
                           _select)
from ._path_provenance import START_NAMES, PathProvenance, _won
from ._path_setup import (_check_cone, _check_per_trial, _check_radii, _check_reference,
                         _check_restarts, _expand, _joint_norm, _match_trials, _random_starts,
                         _reference_attention, _reference_start, _restart_generator, _widen)
from .utils import check_count, check_flag, check_positive


START_RESCALED, START_PREVIOUS, START_REFERENCE, START_RANDOM = 0, 1, 2, 3   # PathResult.start


class PathWarning(UserWarning):
    """The regularization path did not converge at some radius (see :attr:`PathResult.converged`)."""


@dataclass
class PathResult:
    """The path: ``iterates[k]`` is the combined parameter (``W_R`` or ``K_R Q_R^T``) at ``radii[k]``.

    All per-radius fields have shape ``(radii, *trials)``.

    What a point of the path is: the best point found from the starts tried at that radius (see
    ``start``), after projected descent. Where ``converged`` holds it is a *certified stationary
    point* of the ball problem (first-order residual below ``tol``) that is no worse than the
    scaled reference (when one was given) and the best of the starts tried; it is not certified
    to be the ball's global minimiser (another basin may hold a lower loss: try ``restarts``).

    ``tangential`` is ``sin`` of the angle between the gradient and the radial direction at the
    iterate: the first-order optimality residual on the sphere (0 = KKT point of the ball
    problem with the constraint active; 1 = the iterate is inside the ball; NaN = the gradient
    underflowed to exactly 0, logit gaps beyond ~745, where no float64 step can move).
    ``reference_loss`` is the loss of the reference direction scaled to the same radius (``None``
    without a reference). ``converged`` holds where ``tangential <= tol`` and, with a reference,
    the iterate's loss is no larger than the reference's (compared exactly, see
    ``gradients.no_worse``); an underflowed gradient counts as converged only when it passes the
    reference test.

    Provenance. ``start`` (integer, ``(radii, *trials)``) says which start the returned point
    descends from, coded as :attr:`START_NAMES` lists them: ``0`` = ``"rescaled"`` (the previous
    radius's point rescaled onto the new sphere; at the first radius, the caller's start
    rescaled), ``1`` = ``"previous"`` (the previous point itself, when it lies in the new ball),
    ``2`` = ``"reference"`` (the scaled reference), ``3 + i`` = random restart ``i`` (``"restart"``,
    ``0 <= i < restarts``). The deterministic starts (codes 0-2) compete by their loss before
    descent (ties keep the smaller code); the best of them and every random restart are then
    descended, batched, and the lowest end point wins (ties keep the deterministic one).
    With ``restarts = k > 0``, ``restart_loss`` and ``restart_corr`` (shape ``(radii, k, *trials)``)
    hold each random restart's end loss and the correlation of its end point with the returned
    point (1 for the winner itself); :meth:`provenance` summarises them.
    """

    radii: torch.Tensor
    iterates: torch.Tensor
    loss: torch.Tensor
    tangential: torch.Tensor
    converged: torch.Tensor
    reference_loss: torch.Tensor | None = None
    start: torch.Tensor | None = None
    restart_loss: torch.Tensor | None = None
    restart_corr: torch.Tensor | None = None
    restarts: int = 0

    START_NAMES = START_NAMES                                        # codes 0, 1, 2, 3 + i

    @property
    def all_converged(self) -> bool:
        """Whether every trial converged at every radius."""
        return bool(self.converged.all())

    def won(self, kind: str) -> torch.Tensor:
        """Where a start of ``kind`` (one of :attr:`START_NAMES`; ``"restart"`` = any random
        restart) gave the returned point: boolean, shape ``(radii, *trials)``."""
        if self.start is None:
            raise ValueError("this PathResult records no provenance (start is None)")
        return _won(self.start, kind)

    def provenance(self, corr_tol: float = 1e-3) -> "PathProvenance":
        """Summary of which starts won (see :class:`PathProvenance`; ``str()`` of it is one
        sentence for a chapter). A random restart is counted in the winner's basin when
        ``1 - corr(its end point, the returned point) <= corr_tol``."""
        corr_tol = check_positive(corr_tol, "corr_tol", upper=2.0, allow_zero=True)
        if self.start is None:
            raise ValueError("this PathResult records no provenance (start is None)")
        same = None
        if self.restarts:
            same = (1 - self.restart_corr <= corr_tol).sum(1)
        return PathProvenance(radii=self.radii, start=self.start, restarts=self.restarts,
                              same_basin=same, corr_tol=corr_tol,
                              reference=self.reference_loss is not None)


def regularization_path(attention: Attention, problem: Problem, radii, *, steps: int = 1000,
                        head: Head | None = None, loss: str = "logistic",
                        cone: tuple[torch.Tensor, float] | None = None, sphere: bool = False,
                        initial_step: float = 0.05, reference=None, tol: float = 1e-4,
                        warn: bool = True, restarts: int = 0,
                        generator: torch.Generator | None = None, seed: int | None = None
                        ) -> PathResult:
    """Descend the loss over growing norm balls; ``attention`` gives the start and is updated.

    Each radius is solved by projected gradient steps (the gradient divided by its norm) of
    Barzilai-Borwein length, with a non-monotone acceptance test on the loss compared exactly
    (``gradients.no_worse``); a rejected step halves, and a trial whose best point has not improved
    for 40 steps restarts from it (its direction, a shorter step, a window holding only that
    point), so that the non-monotone steps cannot cycle above the best point. Each radius starts from the best of the
    previous iterate, its rescaling onto the new sphere and (with ``reference``) the scaled
    reference, and returns the best point it has seen: the loss never increases along the path,
    nor within a radius from its start. With ``restarts = k``, ``k`` random starts per radius are
    descended too, batched with that best start, and the lowest end point is returned.

    What is verified: a point flagged ``converged`` is a certified stationary point of the ball
    problem (first-order residual ``<= tol``), no worse than the scaled reference when one is
    given, and the best of the starts tried. It is not certified to be the ball's minimiser: a
    first-order method stays in the basin of its start. ``PathResult.start`` records which start
    won at every radius (and :meth:`PathResult.provenance` summarises it), so that a check
    against the reference can say whether the reference itself was the winning start.

    Args:
        attention: ``WAttention``/``PromptAttention`` (ball ``||W||_F <= R``) or ``KQAttention``
            (ball ``||K||^2 + ||Q||^2 <= 2R``), of the problem's dtype and device (the dtype
            rule of :mod:`attnsvm.model.data`); its current value warm-starts the first radius.
            For (K, Q) no single start is reliable: from a small radius (K Q^T is then nearly
            rank one) or from one where the loss already saturates (R ~ 100 on unit-norm data),
            a first-order method can end at a non-optimal stationary point (the book's Check 3.6
            measures both); pass a ``reference`` and compare the losses. Its trials shape must
            be the problem's (or the problem has none: it is then shared by every trial).
        radii: increasing radii ``R``.
        steps: largest number of projected steps per radius; a trial stops earlier once its
            residual is below ``tol / 10``.
        cone: ``(D, mu)`` restricts W to ``corr(W, D) >= 1 - mu`` (W/p parameterizations only).
        sphere: minimize over the sphere ``||W|| = R`` instead of the ball. With a cone this is the
            local path of paper A (its cone also bounds the norm from below, ``||W|| >= R_0``).
        initial_step: first step length as a fraction of the ball radius, in (0, 1].
        reference: a direction (e.g. ``W_mm``, or ``W_mm_*`` for (K, Q)) whose scaled copy
            ``R D / ||D||`` lies in every ball. It is one more start at every radius (so a path
            that ends near it may have started there: see ``PathResult.start``), and a point
            whose loss exceeds that copy's is certainly not the ball's minimiser and is flagged
            as not converged.
        tol: largest first-order residual (``tangential``) counted as converged; the direction
            error that remains is of the order of ``tol`` radians.
        warn: emit a :class:`PathWarning` when some trial has not converged at the last radius.
        restarts: number ``k >= 0`` of random starts per radius and trial (default 0: none, the
            path is then exactly the one computed without this option). Each is a standard
            Gaussian draw of every parameter (float64), scaled jointly onto the sphere of the
            ball (and projected into the ``cone``).
        generator: the ``torch.Generator`` the restarts are drawn from (it is advanced); the
            draws are made on its device in float64 and then moved, so a CPU generator gives
            the same starts on every device and for any number of threads.
        seed: instead of ``generator``, a seed for a fresh CPU generator (default 0 when
            ``restarts > 0`` and no generator is given). Give at most one of the two.
    """
    radii = _check_radii(radii)
    steps = check_count(steps, "steps")
    initial_step = check_positive(initial_step, "initial_step", upper=1.0)
    tol = check_positive(tol, "tol", upper=1.0)
    sphere, warn = check_flag(sphere, "sphere"), check_flag(warn, "warn")
    restarts = _check_restarts(restarts)
    generator = _restart_generator(restarts, generator, seed)
    check_loss(loss)
    check_compatible(attention, problem)
    check_head(head, problem)
    problem = _match_trials(attention, problem)
    if cone is not None:
        cone = _check_cone(cone, attention)
    if reference is not None:
        reference = _check_reference(reference, attention)
    params, core = attention.params, attention.core_dims
    closed_form = head is None and supports(attention)
    fixed = fixed_terms(problem) if closed_form else None
    evaluate = lambda: _evaluate(attention, problem, head, loss, fixed)      # noqa: E731
    if restarts:                 # the best deterministic start and the restarts, as one batch
        lead = tuple(params[0].shape[: params[0].ndim - core[0]])
        wide = _widen(problem, (restarts + 1, *lead))
        wide_fixed = fixed_terms(wide) if closed_form else None
        batch = copy.copy(attention)
        evaluate_batch = lambda: _evaluate(batch, wide, head, loss, wide_fixed)   # noqa: E731
    out: dict[str, list[torch.Tensor]] = {k: [] for k in ("W", "loss", "tangential", "ok", "ref",
                                                          "start", "r_loss", "r_corr")}
    for R in radii.tolist():
        rho = _ball_radius(attention, R)
        with torch.no_grad():
            norm = _joint_norm(params, core)
            if bool((norm == 0).any()):
                raise ValueError("the path needs a nonzero starting point (e.g. a small random W)")
            starts = [(START_RESCALED, [p * _expand(rho / norm, k) for p, k in zip(params, core)])]
            if not sphere and bool((norm <= rho * (1 + 1e-12)).all()):
                starts.append((START_PREVIOUS, [p.clone() for p in params]))   # inside the new ball
            if reference is not None:
                scaled = _reference_attention(attention, reference, R)
                starts.append((START_REFERENCE, _reference_start(attention, scaled.combined())))
            if cone is not None:
                for _, start in starts:
                    start[0] = _project_cone(start[0], cone[0], 1 - cone[1], core[0])
        best, accepted, code = None, [], None
        for kind, start in starts:                           # keep the best start, per trial
            with torch.no_grad():
                for p, q in zip(params, start):
                    p.copy_(q.expand_as(p))
            now = evaluate()
            if best is None:
                _check_per_trial(now, norm)
                best, accepted = now, [p.detach().clone() for p in params]
                code = torch.full(now.risk.shape, kind, dtype=torch.long, device=now.risk.device)
                continue
            better = ~no_worse(best, now)                    # strictly better: ties keep the first
            best = _select(better, now, best)
            accepted = [torch.where(_expand(better, k), p.detach(), a)
                        for p, a, k in zip(params, accepted, core)]
            code = torch.where(better, kind, code)
        if restarts:
            with torch.no_grad():
                draws = _random_starts(params, core, restarts, rho, generator)
                if cone is not None:
                    draws[0] = _project_cone(draws[0], cone[0], 1 - cone[1], core[0])
                batch.params = [torch.cat([a.unsqueeze(0), r]).requires_grad_(True)
                                for a, r in zip(accepted, draws)]
            first = evaluate_batch()
            ends, end_tangential = _descend(batch, evaluate_batch, first,
                                            [p.detach().clone() for p in batch.params], rho,
                                            steps, initial_step, tol, sphere, cone)
            best, tangential = _pick(ends, 0), end_tangential[0]
            with torch.no_grad():
                chosen = [p[0].clone() for p in batch.params]
                for j in range(1, restarts + 1):
                    candidate = _pick(ends, j)
                    better = ~no_worse(best, candidate)      # strictly better: ties keep the first
                    best = _select(better, candidate, best)
                    tangential = torch.where(better, end_tangential[j], tangential)
                    code = torch.where(better, START_RANDOM + j - 1, code)
                    chosen = [torch.where(_expand(better, k), p[j], c)
                              for p, c, k in zip(batch.params, chosen, core)]
                for p, c in zip(params, chosen):
                    p.copy_(c)
                ends_combined = batch.combined()[1:]
                out["r_corr"].append(corr(ends_combined, attention.combined().unsqueeze(0),
                                          ends_combined.ndim - core[0]))
                out["r_loss"].append(ends.risk[1:].detach())
        else:
            best, tangential = _descend(attention, evaluate, best, accepted, rho, steps,
                                        initial_step, tol, sphere, cone)
        converged = tangential <= tol
        if reference is not None:                  # compared the way the path's points are
            ref_eval = _evaluate(scaled, problem, head, loss, fixed)
            converged = no_worse(best, ref_eval) & (converged | torch.isnan(tangential))
            out["ref"].append(ref_eval.risk.detach())
        out["W"].append(attention.combined().clone())
        out["loss"].append(best.risk.detach())
        out["tangential"].append(tangential)
        out["ok"].append(converged)
        out["start"].append(code)
    stacked = {k: torch.stack(v) if v else None for k, v in out.items()}
    result = PathResult(radii=radii, iterates=stacked["W"], loss=stacked["loss"],
                        tangential=stacked["tangential"], converged=stacked["ok"],
                        reference_loss=stacked["ref"], start=stacked["start"],
                        restart_loss=stacked["r_loss"], restart_corr=stacked["r_corr"],
                        restarts=restarts)
    if warn and not bool(result.converged[-1].all()):
        failed = int((~result.converged[-1]).sum())
        warnings.warn(f"the regularization path did not converge at R = {radii[-1]:.4g} in "
                      f"{failed} of {result.converged[-1].numel()} trial(s) (tangential residual "
                      f"above {tol:g}, or a loss above the scaled reference's): see "
                      "PathResult.converged; more steps, more radii or another start may help",
                      PathWarning, stacklevel=2)
    return result


