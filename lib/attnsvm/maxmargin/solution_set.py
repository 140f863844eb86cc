"""Is the solution of a max-margin problem a single point? Probing the optimal set of a norm that
is not strictly convex (the spectral norm, l1, the nuclear norm; chapter 9, Check 9.7).

For the Att-SVM of :func:`~attnsvm.norm_svm` in a norm ``||.||`` with optimal value ``C``, the
optimal set is ``S = {W : (x_{i,alpha_i} - x_it)^T W z_i >= 1 for all i, t != alpha_i,
||W|| <= C}``. :func:`probe_solution_set` returns, over the slightly larger set ``S_eps`` (norm at
most ``(1 + eps) C``), the two solutions with the largest and the smallest inner product with a
direction ``D`` (for ``D`` a training run's direction: the ends of the set as seen from it), and
the one nearest the ray ``{c D : c >= 0}``, three small conic programs.

Why ``eps > 0``: ``S`` has no interior, and an interior-point solver asked to stay inside it may
fail or not, depending on rounding (on one processor it succeeds, on another it stops). The probe
therefore tries the tolerances ``EPS_LADDER`` in turn, each with Clarabel, then SCS, and keeps the
first answer that it verifies itself (constraints met to ``1e-6``, norm within ``(1 + eps) C`` to
``1e-6`` relative); the result names the tolerance and the solver. A larger ``eps`` can only widen
the probe: if ``S`` were the single point ``W*``, every point of ``S_eps`` would lie within
``O(sqrt(eps))`` relative distance of it (within ``O(eps)`` at a vertex), so two probes with
correlation far below ``1 - eps`` still show that ``S`` is not a point. When no attempt verifies,
:class:`~attnsvm.IllConditionedError` names the instance's size and the attempts.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ._cvxpy import cp
from ..model.metrics import corr
from .normsvm import matrix_norm, norm_svm
from .svm import _constrained, _numpy, _selection, token_differences
from ._svm_core import SCS_OPTIONS, IllConditionedError
from ..model.utils import as_tensor, check_finite, exact_scale

EPS_LADDER = (1e-6, 1e-5, 1e-4)        # relative slack on the optimal norm, tried in this order
SOLVERS = ("CLARABEL", "SCS")
FEASIBILITY_TOL = 1e-6


@dataclass(frozen=True)
class SolutionSetProbe:
    """Three points of the (slightly widened) optimal set of a max-margin problem.

    Attributes:
        optimum: the optimal norm ``C`` (from :func:`~attnsvm.norm_svm`).
        highest, lowest: the solutions with the largest / smallest ``<D, W>``, ``(d, d)``.
        nearest: the solution nearest the ray ``{c D : c >= 0}`` in Frobenius distance.
        spread: ``corr(highest, lowest)``; 1 when the set is a point (up to ``eps``).
        eps: the relative slack on the norm that the verified answers used.
        solver: the solver that produced them.
        attempts: every (eps, solver, outcome) tried, in order.
    """

    optimum: float
    highest: torch.Tensor
    lowest: torch.Tensor
    nearest: torch.Tensor
    spread: float
    eps: float
    solver: str
    attempts: tuple[tuple[float, str, str], ...]


def _norm_expression(W: cp.Variable, norm) -> cp.Expression:
    if norm == "spectral":
        return cp.sigma_max(W)
    if norm == "nuc":
        return cp.normNuc(W)
    return cp.pnorm(cp.vec(W, order="C"), norm)


def _solve_three(features: np.ndarray, direction: np.ndarray, d: int, norm, bound: float,
                 solver: str) -> tuple[list[np.ndarray] | None, str]:
    W = cp.Variable((d, d))
    constraints = [features @ cp.vec(W, order="C") >= 1, _norm_expression(W, norm) <= bound]
    inner = cp.sum(cp.multiply(direction, W))
    c = cp.Variable(nonneg=True)
    problems = [cp.Problem(cp.Maximize(inner), constraints),
                cp.Problem(cp.Minimize(inner), constraints),
                cp.Problem(cp.Minimize(cp.norm(W - c * direction, "fro")), constraints)]
    answers = []
    for problem in problems:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            try:
                problem.solve(solver=solver, **(SCS_OPTIONS if solver == "SCS" else {}))
            except cp.error.SolverError as error:
                return None, f"solver error ({str(error)[:60]})"
        if W.value is None:
            return None, f"status {problem.status}"
        answers.append(np.array(W.value))
    return answers, "solved"


def _verified(W: np.ndarray, features: np.ndarray, norm, bound: float) -> bool:
    margins_ok = float((features @ W.ravel()).min()) >= 1 - FEASIBILITY_TOL
    value = float(matrix_norm(torch.from_numpy(W), "spectral" if norm == "spectral" else norm)) \
        if norm != "nuc" else float(np.linalg.svd(W, compute_uv=False).sum())
    return margins_ok and value <= bound * (1 + FEASIBILITY_TOL)


def probe_solution_set(X, Z, alpha, norm, direction, mask=None) -> SolutionSetProbe:
    """Probe the optimal set of the ``norm`` Att-SVM of ``(X, Z, alpha)`` along ``direction``.

    Args:
        X: tokens ``(n, T, d)``; Z: queries ``(n, d)``; alpha: the selection ``(n,)``.
        norm: ``"spectral"``, ``"nuc"`` or an lp exponent ``p >= 1`` (as in ``norm_svm``).
        direction: ``(d, d)``, e.g. a training run's final W (only its direction matters).
        mask: as in :func:`~attnsvm.norm_svm`.

    Raises:
        InfeasibleError: the SVM is infeasible (from ``norm_svm`` / ``att_svm``).
        IllConditionedError: no tolerance of ``EPS_LADDER`` and no solver gave a verified answer.
    """
    X, Z = _numpy(X, "X"), _numpy(Z, "Z")
    if X.ndim != 3 or Z.shape != (X.shape[0], X.shape[2]):
        raise ValueError(f"X must be (n, T, d) and Z (n, d); got {X.shape} and {Z.shape}")
    n, T, d = X.shape
    alpha = _selection(alpha, n, T)
    D = as_tensor(direction, "direction", dtype=torch.float64)
    if tuple(D.shape) != (d, d):
        raise ValueError(f"direction must be a (d, d) = ({d}, {d}) matrix, got {tuple(D.shape)}")
    check_finite(D, "direction")
    if not float(D.abs().max()) > 0:
        raise ValueError("direction is the zero matrix: it defines no inner product to probe along")
    if norm == "nuc":
        from .svm import att_svm
        optimum_norm = float(att_svm(X, Z, alpha, "nuc", mask=mask).objective)
    else:
        optimum_norm = float(norm_svm(X, Z, alpha, norm, mask=mask).objective)
    # work on data of unit scale (exact powers of two), the optimum rescaled accordingly
    sx, sz = exact_scale(X), exact_scale(Z)
    keep = _constrained(mask, alpha, n, T)
    features = np.einsum("ntd,ne->ntde", token_differences(X * sx, alpha), Z * sz)[keep]
    features = features.reshape(-1, d * d)
    optimum = optimum_norm / (sx * sz)
    unit = (D / D.norm()).numpy()
    attempts = []
    for eps in EPS_LADDER:
        bound = optimum * (1 + eps)
        for solver in SOLVERS:
            answers, outcome = _solve_three(features, unit, d, norm, bound, solver)
            if answers is not None and not all(_verified(W, features, norm, bound) for W in answers):
                answers, outcome = None, "answer not verified"
            attempts.append((eps, solver, outcome if answers is None else "verified"))
            if answers is not None:
                hi, lo, near = (torch.from_numpy(W * sx * sz) for W in answers)
                return SolutionSetProbe(optimum=optimum_norm, highest=hi, lowest=lo, nearest=near,
                                        spread=float(corr(hi, lo)), eps=eps, solver=solver,
                                        attempts=tuple(attempts))
    raise IllConditionedError(
        f"no verified probe of the {norm} solution set (n={n}, T={T}, d={d}); attempts: "
        + "; ".join(f"eps={e:g} {s}: {o}" for e, s, o in attempts))
