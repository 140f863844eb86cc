"""The machinery of the regularization-path studies (book chapters 1 to 3).

What the chapters call to compute and read a path without repeating the recipe in every notebook:

* :func:`random_starts` and :func:`global_path`: the global path recipe (small random starts
  warm-started through the radii, plus one fresh start per candidate SVM direction at large radii;
  per radius the point of lowest loss, and which start it came from);
* :func:`candidate_directions`: the selections whose SVM direction can end a path;
* :func:`excess_loss`: ``L(W) - L_alpha`` without cancellation (ranks points whose losses agree
  to every float64 digit);
* :func:`limit_offset`: ``delta*``, the limit of the path's offset orthogonal to ``W^mm``;
* :func:`dip`: depth and position of the deepest dip of a curve;
* :func:`c_star_margin`: the set-invariant measure of paper A's Theorem 2 for ``(K, Q)`` paths;
* :func:`selection_table`: the margins, support tokens and local optimality of one selection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from ..model.data import Problem
from ..maxmargin.duality import constraint_features
from ..model.gradients import LOSS_DERIVATIVES, LOSS_INCREMENTS
from ..model.heads import check_loss
from ..model.models import WAttention
from ..model.path import PathResult, regularization_path
from ..model._path_setup import _check_radii
from ..book.report import format_table
from ..maxmargin.selections import _alpha
from ..maxmargin.svm import SVMResult, is_locally_optimal
from ..model.utils import (DEFAULT_DTYPE, as_array, as_tensor, check_count, check_generator, check_positive,
                    check_shape)

CANDIDATE_KINDS = ("global", "locally optimal")


def _problem(problem, single: bool = False) -> Problem:
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if single and problem.batch_shape:
        raise ValueError("pass one instance (use problem.trial(b) on batched problems)")
    return problem


def _matrices(W, name: str, d: int) -> torch.Tensor:
    W = as_tensor(W, name)
    check_shape(W, name, (d, d), "d, d")
    return W


def _selection(alpha, problem: Problem) -> torch.Tensor:
    """Token indices ``(..., n)`` in ``[0, T)``, broadcastable against the problem's trials."""
    alpha = as_array(alpha, "alpha")
    if alpha.ndim == 0:
        raise ValueError(f"alpha must have shape (..., n) = (..., {problem.n}), got a scalar")
    return _alpha(alpha, tuple(alpha.shape[:-1]) + (problem.n,), problem.T)


def random_starts(count: int, d: int, generator: torch.Generator, scale: float = 1e-2) -> torch.Tensor:
    """``count`` small Gaussian matrices ``scale * N(0, I)`` of shape ``(count, d, d)``, float64:
    one start (trial) each of a batched ``WAttention``. The same generator state gives the same
    starts."""
    count, d = check_count(count, "count", 1), check_count(d, "d", 1)
    if generator is None:
        raise TypeError("generator must be a torch.Generator (e.g. A.set_seed(0)), got None")
    check_generator(generator)
    scale = check_positive(scale, "scale")
    return scale * torch.randn(count, d, d, generator=generator, dtype=DEFAULT_DTYPE)


def excess_loss(W, problem: Problem, alpha=None, loss: str = "logistic") -> torch.Tensor:
    """``L(W) - L_alpha`` per matrix of ``W`` ``(..., d, d)``: the empirical risk of the problem's
    linear head minus the hard-selection risk ``L_alpha = (1/n) sum_i loss(gamma_{i alpha_i})``
    (``alpha`` defaults to ``opt``, where ``L_opt = L*``, the infimum of ``L``; paper A, optimal
    tokens minimise the risk).

    Computed from the small probabilities, ``loss(top + d) - loss(top)`` with
    ``d = -sum_t s_t (gamma_{i alpha_i} - gamma_it)`` evaluated without cancellation: it ranks
    points whose losses agree to all 16 digits (e.g. 1e-87 apart on a path at large radius). It is
    negative where ``W`` does better than all attention on ``alpha``.
    """
    problem = _problem(problem)
    check_loss(loss)
    W = _matrices(W, "W", problem.d)
    probs = WAttention(W).probabilities(problem)                          # (..., n, T)
    scores = problem.scores.expand_as(probs)
    alpha = problem.opt if alpha is None else _selection(alpha, problem)
    try:
        index = alpha.expand(probs.shape[:-1]).unsqueeze(-1)
    except RuntimeError:
        raise ValueError(f"alpha of shape {tuple(alpha.shape)} does not match the problem and W "
                         f"(attention of shape {tuple(probs.shape)})") from None
    top = scores.gather(-1, index)                                        # gamma_{i alpha_i}
    gap = (probs * (top - scores)).sum(-1)                    # gamma_{i alpha_i} - Y_i f(X_i), exactly
    return LOSS_INCREMENTS[loss](top.squeeze(-1), -gap).mean(-1)


def candidate_directions(kinds: Mapping) -> tuple[list[tuple[int, ...]], list[str], torch.Tensor]:
    """The selections whose SVM direction can end a path (kind ``"global"`` or ``"locally
    optimal"``, paper A's locally optimal directions), their kinds and their unit Att-SVM
    directions ``W^mm(alpha) / ||W^mm(alpha)||_F``, shape ``(C, d, d)``, in the order of ``kinds``
    (the output of :func:`attnsvm.maxmargin.classify_selections`)."""
    if not isinstance(kinds, Mapping):
        raise TypeError(f"kinds must be the dict returned by classify_selections, got {type(kinds).__name__}")
    chosen = []
    for a, value in kinds.items():
        if not (isinstance(value, tuple) and len(value) == 2):
            raise TypeError(f"kinds[{a!r}] must be a (kind, SVMResult) pair, got {value!r}")
        k, r = value
        if k in CANDIDATE_KINDS:
            if not isinstance(r, SVMResult):
                raise TypeError(f"kinds[{a!r}] is {k!r} but carries no SVMResult")
            chosen.append((a, k, r.W / r.W.norm()))
    if not chosen:
        raise ValueError("no global or locally optimal selection: Att-SVM(opt) is infeasible, so "
                         "the path has no candidate direction")
    return [a for a, _, _ in chosen], [k for _, k, _ in chosen], torch.stack([D for *_, D in chosen])


@dataclass(frozen=True)
class GlobalPath:
    """The result of :func:`global_path` on the radii ``(K,)`` of one instance.

    Attributes:
        rand: the random-start path (a :class:`PathResult` with one trial per start).
        fresh: ``{radius index: PathResult}``, one trial per candidate direction, for the radii
            from ``fresh_from`` on.
        W: ``(K, d, d)`` the point of lowest loss at each radius.
        converged, tangential: ``(K,)`` whether that point converged, and its residual.
        winner: ``(K,)`` which start it came from: ``j < n_random`` is random start ``j``,
            ``j >= n_random`` the candidate direction ``j - n_random``.
        n_random: the number of random starts.
    """

    rand: PathResult
    fresh: dict
    W: torch.Tensor
    converged: torch.Tensor
    tangential: torch.Tensor
    winner: torch.Tensor
    n_random: int

    @property
    def from_candidate(self) -> torch.Tensor:
        """``(K,)`` True where the point of lowest loss came from a fresh candidate start."""
        return self.winner >= self.n_random


def global_path(problem: Problem, radii, starts, directions, *, fresh_from: float) -> GlobalPath:
    """The global path recipe (book chapter 2, "Computing the path") for one instance:

    1. the path from the small random ``starts`` ``(k, d, d)`` (one trial each), warm-started from
       the smallest radius (:func:`attnsvm.regularization_path`);
    2. at every radius ``R >= fresh_from``, one fresh start ``R D`` per unit candidate direction
       ``D`` of ``directions`` ``(C, d, d)``, with ``D`` as the path's reference;
    3. per radius, the point of lowest loss among all of them, compared with :func:`excess_loss`
       (exact where the losses agree to every digit); ties go to the first start.

    The candidates include ``W^mm(opt)`` itself (:func:`candidate_directions`), so a path that ends
    there is a sanity check of the recipe; the random-start path alone is the evidence.
    """
    problem = _problem(problem, single=True)
    starts = _matrices(starts, "starts", problem.d)
    directions = _matrices(directions, "directions", problem.d)
    if starts.ndim != 3 or directions.ndim != 3:
        raise ValueError(f"starts and directions must be stacks (k, d, d) and (C, d, d), got "
                         f"{tuple(starts.shape)} and {tuple(directions.shape)}")
    if len(starts) == 0 or len(directions) == 0:
        raise ValueError(f"starts and directions must hold at least one matrix each, got "
                         f"{tuple(starts.shape)} and {tuple(directions.shape)}")
    if not bool((torch.linalg.matrix_norm(directions) > 0).all()):
        raise ValueError("every candidate direction must be nonzero (unit Frobenius norm, from "
                         "candidate_directions)")
    fresh_from = check_positive(fresh_from, "fresh_from")
    radii = _check_radii(radii)
    rand = regularization_path(WAttention(starts), Problem.stack([problem] * len(starts)), radii)
    fresh = {k: regularization_path(WAttention(R * directions),
                                    Problem.stack([problem] * len(directions)), [R],
                                    reference=directions)
             for k, R in enumerate(radii.tolist()) if R >= fresh_from}
    W, ok, tangential, winner = [], [], [], []
    for k in range(len(radii)):
        runs = [(rand, k)] + ([(fresh[k], 0)] if k in fresh else [])   # (result, its radius index)
        pool = torch.cat([r.iterates[i] for r, i in runs])
        j = int(excess_loss(pool, problem).argmin())
        W.append(pool[j])
        ok.append(torch.cat([r.converged[i] for r, i in runs])[j])
        tangential.append(torch.cat([r.tangential[i] for r, i in runs])[j])
        winner.append(j)
    return GlobalPath(rand=rand, fresh=fresh, W=torch.stack(W), converged=torch.stack(ok),
                      tangential=torch.stack(tangential), winner=torch.tensor(winner),
                      n_random=len(starts))


def limit_offset(problem: Problem, svm: SVMResult, loss: str = "logistic") -> torch.Tensor:
    """``delta*``: the minimiser over ``delta`` orthogonal to ``D = W^mm / ||W^mm||_F`` of

        g(delta) = sum_{support (i, t)} kappa_i (gamma_{i opt_i} - gamma_it) exp(-<F_it, delta>),

    with ``kappa_i = -loss'(gamma_{i opt_i})`` and ``F_it = (x_{i opt_i} - x_it) z_i^T``: the limit
    of the offset ``W_R - R D`` of the path (book chapter 2, exercise ex-ch2-exponential). ``svm``
    is the Frobenius Att-SVM(opt) solution of ``problem``. Solved by L-BFGS; raises
    ``ValueError`` when ``g`` has no minimiser (the offset grows without bound) or when the
    solution is not stationary.
    """
    problem = _problem(problem, single=True)
    check_loss(loss)
    if (not isinstance(svm, SVMResult) or svm.norm != "fro" or svm.W.shape != (problem.d, problem.d)
            or tuple(svm.margins.shape) != (problem.n, problem.T)):
        raise TypeError("svm must be the Frobenius Att-SVM(opt) solution (an SVMResult of shape "
                        f"({problem.d}, {problem.d}), margins ({problem.n}, {problem.T})) of the problem")
    F_all = constraint_features(problem.X, problem.Z, problem.opt)          # (n, T, d, d)
    margins = torch.einsum("ntde,de->nt", F_all, svm.W.to(F_all))
    own = torch.zeros_like(margins, dtype=torch.bool)
    own[torch.arange(problem.n), problem.opt] = True
    if not torch.allclose(margins[~own], svm.margins.to(F_all)[~own], rtol=1e-6, atol=1e-6):
        raise ValueError("svm is not the Att-SVM solution of this problem's optimal tokens "
                         "(its margins differ from those of svm.W on opt)")
    if not bool(svm.support.any()):
        raise ValueError("svm has no support token")
    D = svm.W / svm.W.norm()
    i, t = svm.support.nonzero(as_tuple=True)
    F = F_all[svm.support]                                                 # (#support, d, d)
    g_opt = problem.scores[i, problem.opt[i]]
    weight = -LOSS_DERIVATIVES[loss](g_opt) * (g_opt - problem.scores[i, t])
    delta = torch.zeros_like(D, requires_grad=True)
    solver = torch.optim.LBFGS([delta], max_iter=500, tolerance_grad=1e-14, tolerance_change=1e-16,
                               line_search_fn="strong_wolfe")

    def g(value: torch.Tensor) -> torch.Tensor:
        ortho = value - (value * D).sum() * D
        return (weight * torch.exp(-(F * ortho).sum((-2, -1)))).sum()

    def closure():
        solver.zero_grad()
        value = g(delta)
        value.backward()
        return value

    solver.step(closure)
    delta = delta.detach()
    delta = delta - (delta * D).sum() * D
    point = delta.clone().requires_grad_(True)
    value = g(point)
    grad, = torch.autograd.grad(value, point)
    if not (bool(torch.isfinite(delta).all()) and float(grad.norm()) <= 1e-6 * float(weight.sum())):
        raise ValueError(f"g has no minimiser orthogonal to W^mm (L-BFGS ends at ||delta|| = "
                         f"{float(delta.norm()):.3g} with gradient {float(grad.norm()):.1e}): the "
                         "support constraints do not hold the offset")
    return delta


def dip(curve) -> tuple[float, int, int]:
    """The deepest dip of a 1-D curve ``(K,)`` (e.g. ``corr(W_R, W^mm)`` over the radii): its depth
    ``max_k (max_{j <= k} c_j - c_k)``, the index of its bottom and the index of the maximum
    before it (first index on ties). A nondecreasing curve has depth 0 at index 0."""
    curve = as_tensor(curve, "curve")
    if curve.ndim != 1 or curve.numel() == 0:
        raise ValueError(f"curve must be a nonempty 1-D tensor, got shape {tuple(curve.shape)}")
    running = torch.cummax(curve, 0).values
    bottom = int((running - curve).argmax())
    depth = float((running - curve)[bottom])
    if depth == float("inf"):
        raise ValueError("the depth of the dip overflows float64 (the curve spans more than 1.8e308): "
                         "rescale the curve")
    return depth, bottom, int(curve[:bottom + 1].argmax())


def c_star_margin(iterates, problem: Problem, alpha, nuc) -> torch.Tensor:
    """``C* rho(W / ||W||_*)`` per matrix of ``iterates`` ``(..., B, d, d)``: the nuclear norm
    ``C* = ||W^mm_*(alpha)||_*`` of the solution ``nuc`` ``(B, d, d)`` of Att-SVM_*(alpha) times
    the smallest margin ``min_{i, t != alpha_i} (x_{i alpha_i} - x_it)^T W z_i`` of ``W`` scaled to
    unit nuclear norm (``problem`` with trials ``(B,)``, ``alpha`` ``(B, n)``; or no trials and
    ``(d, d)``, ``(n,)``).

    It is at most 1, with equality exactly on the solution set of Att-SVM_*(alpha) scaled by
    ``1/C*``: a measure of paper A's Theorem 2 for ``W = K Q^T`` (convergence in direction to that
    set) that does not depend on which solution the solver returns.
    """
    problem = _problem(problem)
    d = problem.d
    iterates, nuc = _matrices(iterates, "iterates", d), _matrices(nuc, "nuc", d)
    if iterates.numel() == 0:
        raise ValueError(f"iterates has shape {tuple(iterates.shape)}: pass at least one matrix")
    alpha = _selection(alpha, problem)
    if tuple(nuc.shape[:-2]) != problem.batch_shape or tuple(alpha.shape[:-1]) != problem.batch_shape:
        raise ValueError(f"nuc {tuple(nuc.shape)} and alpha {tuple(alpha.shape)} must have the "
                         f"problem's trials {problem.batch_shape} before (d, d) and (n,)")
    norms = torch.linalg.matrix_norm(iterates, "nuc")
    if not bool((norms > 0).all()) or not bool((torch.linalg.matrix_norm(nuc, "nuc") > 0).all()):
        raise ValueError("iterates and nuc must be nonzero matrices (a zero W has no direction)")
    W_bar = iterates / norms[..., None, None]
    s = torch.einsum("...ntd,...de,...ne->...nt", problem.X, W_bar, problem.Z)   # x_it^T W z_i
    idx = alpha.expand(s.shape[:-1]).unsqueeze(-1)
    gap = (s.gather(-1, idx) - s).scatter(-1, idx, float("inf"))                # margins, own token out
    return torch.linalg.matrix_norm(nuc, "nuc") * gap.flatten(-2).amin(-1)


def selection_table(problem: Problem, alpha, res: SVMResult) -> str:
    """A table of one selection ``alpha`` ``(n,)`` of one instance with its Att-SVM solution
    ``res``: per example and token its score, its margin under ``res.W``, whether it is a support
    token and whether it beats the selected token, then whether the selection is locally optimal
    per example (paper A's definition: every support token scores below the selected one).
    Examples and tokens are counted from 1."""
    problem = _problem(problem, single=True)
    alpha = _selection(alpha, problem)
    if alpha.ndim != 1:
        raise ValueError(f"alpha must have shape ({problem.n},), got {tuple(alpha.shape)}")
    if not isinstance(res, SVMResult) or tuple(res.margins.shape) != (problem.n, problem.T):
        raise TypeError(f"res must be the SVMResult of this selection (margins of shape "
                        f"({problem.n}, {problem.T}))")
    rows = []
    for i in range(problem.n):
        for t in range(problem.T):
            tags = ("selected " if t == int(alpha[i]) else "") + ("opt" if t == int(problem.opt[i]) else "")
            margin = "" if t == int(alpha[i]) else f"{float(res.margins[i, t]):.4f}"
            better = ("yes" if float(problem.scores[i, t]) > float(problem.scores[i, alpha[i]]) else "no") \
                if t != int(alpha[i]) else ""
            rows.append([i + 1, t + 1, f"{float(problem.scores[i, t]):+.4f}", margin,
                         "yes" if bool(res.support[i, t]) else "", better, tags])
    table = format_table(["example", "token", "score", "margin", "support", "beats selected?", ""], rows)
    return f"{table}\nlocally optimal per example: {is_locally_optimal(problem, alpha, res).tolist()}"
