"""Basin maps: where gradient descent ends from each start of a grid, on an instance with one input
(book page 'What is proved where', "Local convergence of GD for W" and "Global convergence of GD for W"; book
chapter 4, the basin map and its empirical cone).

With ``n = 1`` input and query ``z`` the logits depend on ``W`` only through ``u = W z``, and a start
``W(0) = u_0 z^T`` stays of this form (the gradient is ``grad_u L z^T``): gradient descent on ``W``
is gradient descent on ``u``, which can be drawn when ``d = 2``. The functions here build a polar
grid of starts ``u_0``, run every start as one batched program, label where each run ends, and read
an empirical cone ``{||W|| >= R0, angle to W^mm(alpha) z <= theta}`` off the grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch

from ..model.data import Problem, random_problem
from ..model.heads import empirical_risk
from ..model.models import WAttention
from ..maxmargin.selections import check_saturation, run_outcomes, selection_kind
from ..maxmargin.svm import SVMResult
from ..model.train import train
from ..model._train_log import direction_angle
from ..model.utils import as_array, as_mask, as_tensor, check_count, check_positive, check_seed, set_seed


def _one_input(problem: Problem) -> Problem:
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if problem.batch_shape or problem.n != 1:
        raise ValueError(f"a basin map needs one instance with one input (n = 1, no trials), got "
                         f"n = {problem.n} and trials {problem.batch_shape}")
    return problem


def _starts(problem: Problem, u0) -> torch.Tensor:
    u0 = as_tensor(u0, "u0", dtype=problem.X.dtype)
    if u0.ndim != 2 or u0.shape[-1] != problem.d or not u0.shape[0]:
        raise ValueError(f"u0 must have shape (starts, d) = (B, {problem.d}), got {tuple(u0.shape)}")
    return u0


def repeat_instance(problem: Problem, count: int) -> Problem:
    """``count`` copies of one instance as a batched problem (a trials dimension of ``count``)."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if problem.batch_shape:
        raise ValueError("repeat_instance takes one instance (no trials dimension)")
    count = check_count(count, "count", 1)
    return Problem(problem.X.expand(count, -1, -1, -1), problem.Y.expand(count, -1),
                   problem.Z.expand(count, -1, -1), problem.v.expand(count, -1))


def polar_starts(radius: float, n_angles: int, ratios) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A polar grid of 2-D starts: ``n_angles`` equally spaced directions (from angle 0) times the
    norms ``radius * ratios``. Returns ``(u0 (B, 2), angle (B,), ratio (B,))``, directions outer."""
    radius = check_positive(radius, "radius")
    n_angles = check_count(n_angles, "n_angles", 1)
    ratios = as_tensor(ratios, "ratios")
    if ratios.ndim != 1 or not ratios.numel() or bool((ratios <= 0).any()):
        raise ValueError(f"ratios must be a non-empty 1-D array of positive numbers, got {ratios.tolist()}")
    angles = torch.arange(n_angles, dtype=ratios.dtype) * 2 * math.pi / n_angles
    angle, ratio = (t.flatten() for t in torch.meshgrid(angles, ratios, indexing="ij"))
    return radius * ratio[:, None] * torch.stack([torch.cos(angle), torch.sin(angle)], -1), angle, ratio


def angle_between(u, ref) -> torch.Tensor:
    """The angle (radians, in [0, pi]) between each row of ``u`` and the vector ``ref``, accurate
    near 0 (``2 atan2(|a - b|, |a + b|)`` on unit vectors)."""
    u, ref = as_tensor(u, "u"), as_tensor(ref, "ref")
    if ref.ndim != 1 or u.shape[-1:] != ref.shape:
        raise ValueError(f"u (..., d) and ref (d,) must share d, got {tuple(u.shape)} and {tuple(ref.shape)}")
    if not float(ref.norm()) > 0 or bool((u.norm(dim=-1) == 0).any()):
        raise ValueError("a zero vector has no direction: u and ref must be non-zero")
    return direction_angle(u, ref.expand_as(u), u.ndim - 1)


def basin_map(problem: Problem, u0, methods: Mapping[str, tuple[str, float]], steps: int = 2000,
              saturation: float | None = 0.99) -> dict:
    """Run every start ``W(0) = u0[b] z^T`` of a one-input ``problem`` for ``steps`` steps of each
    method (``{name: (method, lr)}``, e.g. ``{"GD": ("gd", 1.0), "NGD": ("ngd", 0.1)}``), one
    batched program per method. Returns ``{name: {"alpha": (B,), "kinds": [...], "u": (B, d)}}``:
    the top token of each run, its outcome (:func:`run_outcomes`) and its final ``W z``."""
    problem = _one_input(problem)
    u0 = _starts(problem, u0)
    if not isinstance(methods, Mapping) or not methods:
        raise TypeError("methods must be a non-empty mapping {name: (method, lr)}")
    check_saturation(saturation)
    steps = check_count(steps, "steps", 1)
    z = problem.Z[0]
    batch = repeat_instance(problem, len(u0))
    out = {}
    for name, spec in methods.items():
        if not isinstance(spec, (list, tuple)) or len(spec) != 2:
            raise ValueError(f"methods[{name!r}] must be a pair (method, lr), got {spec!r}")
        method, lr = spec
        attention = WAttention(u0[:, :, None] * z[None, None, :])
        train(attention, batch, steps, lr, method=method, log_every=steps)
        alpha, kinds = run_outcomes(batch, attention.probabilities(batch), saturation=saturation)
        out[name] = dict(alpha=alpha[:, 0], kinds=kinds, u=attention.combined() @ z)
    return out


def initial_gradient_norms(problem: Problem, u0) -> torch.Tensor:
    """``||grad L(W(0))||_F`` at every start ``W(0) = u0[b] z^T`` of a one-input problem (autograd
    through the library's risk)."""
    problem = _one_input(problem)
    u0 = _starts(problem, u0)
    batch = repeat_instance(problem, len(u0))
    attention = WAttention(u0[:, :, None] * problem.Z[0][None, None, :])
    grad, = torch.autograd.grad(empirical_risk(attention, batch).sum(), attention.params)
    return grad.flatten(1).norm(dim=1)


def basin_labels(alpha, kinds: Sequence[str], local_token: int | None = None) -> list[str]:
    """Where each run of a one-input basin map ended: ``"opt"`` (global), ``"alpha"`` (the locally
    optimal ``local_token``), ``"unsaturated"`` or ``"other selection"``."""
    alpha = as_array(alpha, "alpha")
    if alpha.is_floating_point() or alpha.dtype == torch.bool:
        raise TypeError(f"alpha must hold integer token indices, got {alpha.dtype}")
    if isinstance(kinds, str) or not isinstance(kinds, (list, tuple)) or alpha.ndim != 1 or len(kinds) != len(alpha):
        raise ValueError("alpha (B,) and kinds (a list of B outcomes) must describe the same runs")
    labels = []
    for a, kind in zip(alpha.tolist(), kinds):
        if kind == "global":
            labels.append("opt")
        elif kind == "locally optimal" and a == local_token:
            labels.append("alpha")
        else:
            labels.append("unsaturated" if kind == "unsaturated" else "other selection")
    return labels


def empirical_cones(u0, ref, success, radii, step_angle: float) -> list[dict]:
    """Cones read off a grid of starts (book chapter 4, "An empirical cone"). For each ``R0`` of
    ``radii``: ``t_fail`` is the smallest angle to ``ref`` of a start of norm ``>= R0`` that did not
    ``succeed``; the cone's half-angle is one grid step inside, ``theta = t_fail - step_angle``, and
    ``mu = 1 - cos(theta)``. Returns the cones that hold at least one start, as dicts ``R0, theta,
    mu, t_fail, count``. Every grid start inside a cone succeeded by construction: test a cone on
    fresh starts."""
    u0 = as_tensor(u0, "u0")
    if u0.ndim != 2 or not u0.shape[0]:
        raise ValueError(f"u0 must have shape (starts, d), got {tuple(u0.shape)}")
    success = as_mask(success, "success", (u0.shape[0],))
    step_angle = check_positive(step_angle, "step_angle", upper=math.pi)
    radii = as_tensor(radii, "radii")
    if radii.ndim != 1 or not radii.numel():
        raise ValueError("radii must be a non-empty 1-D array")
    theta = angle_between(u0, ref)
    norm0 = u0.norm(dim=-1)
    cones = []
    for R in radii.tolist():
        ring = norm0 >= R * (1 - 1e-12)
        fail = ring & ~success
        t_fail = float(theta[fail].min()) if fail.any() else math.pi
        t_cone = t_fail - step_angle
        inside = ring & (theta <= t_cone + 1e-12)
        if t_cone > 0 and inside.any():
            cones.append(dict(R0=R, theta=t_cone, mu=1 - math.cos(t_cone), t_fail=t_fail,
                              count=int(inside.sum())))
    return cones


@dataclass
class TrapInstance:
    """A one-input 2-D instance whose second-best token is locally optimal
    (:func:`local_trap_instance`): ``problem``, the local token ``alpha``, its ``svm``
    (Att-SVM(alpha)), the optimal token's ``margin`` in it, the ``draw`` picked and how many of the
    draws were ``kept``."""
    problem: Problem
    alpha: int
    svm: SVMResult
    margin: float
    draw: int
    kept: int


def local_trap_instance(seed: int = 2, draws: int = 300, min_gap: float = 0.2) -> TrapInstance:
    """The basin map's instance (book chapter 4, a documented search): ``draws`` instances of
    ``random_problem(1, 3, 2)`` from ``set_seed(seed)`` with ``Y = +1``; keep those whose
    second-best token is locally optimal with score gaps ``>= min_gap`` to the tokens above and
    below it; pick the one whose optimal token lies farthest beyond the margin of Att-SVM(alpha)
    (largest ``(x_alpha - x_opt)^T W^mm(alpha) z``), which makes the deepest trap."""
    seed = check_seed(seed)
    draws = check_count(draws, "draws", 1)
    min_gap = check_positive(min_gap, "min_gap", allow_zero=True)
    candidates = random_problem(1, 3, 2, trials=draws, generator=set_seed(seed))
    kept, best = 0, None
    for k in range(draws):
        Pk = candidates.trial(k)
        Pk = Problem(Pk.X, torch.ones(1, dtype=Pk.X.dtype), Pk.Z, Pk.v)
        sc = Pk.scores[0]
        order = sc.argsort(descending=True)
        if float(sc[order[0]] - sc[order[1]]) < min_gap or float(sc[order[1]] - sc[order[2]]) < min_gap:
            continue
        kind, result = selection_kind(Pk, [int(order[1])])
        if kind != "locally optimal":
            continue
        kept += 1
        margin = float(result.margins[0, order[0]])
        if best is None or margin > best.margin:
            best = TrapInstance(Pk, int(order[1]), result, margin, k, 0)
    if best is None:
        raise ValueError(f"none of the {draws} draws has a locally optimal second-best token with "
                         f"score gaps >= {min_gap}: draw more or lower min_gap")
    best.kept = kept
    return best
