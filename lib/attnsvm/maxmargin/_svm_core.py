"""The numerical core of the max-margin solvers (used by every SVM of the library).

The least-distance screen: ``_min_norm_point`` solves ``min ||w|| s.t. A w >= h`` exactly as a
non-negative least-squares problem, which decides feasibility (to float64 precision, else
:class:`InfeasibleError` / :class:`IllConditionedError`) and *is* the Frobenius solution. The other
norms, on constraints rescaled by the least-norm point: ``_solve`` hands them to cvxpy (Clarabel
by default; nuclear norms in their dual form), compiled once per size (``_compiled``), never
warm-started, its answer checked against the constraints; ``_solve_nuclear`` solves many nuclear
problems of one size together by the certified interior-point method of ``nuclear_ipm``.
"""

from __future__ import annotations

import importlib.util
import warnings
from functools import lru_cache

import numpy as np
import scipy.optimize
import torch

from ._cvxpy import compiled_per_thread, cp
from ._nuclear_ipm import certified_nuclear_svms


class InfeasibleError(ValueError):
    """The max-margin problem has no solution: no W separates the selected tokens."""


class IllConditionedError(ValueError):
    """The max-margin problem is feasible (or too close to infeasible for float64 to tell) but
    too ill-conditioned for an accurate solution: the message says why."""


@lru_cache(maxsize=1)
def _installed_solvers() -> tuple[str, ...]:
    return tuple(cp.installed_solvers())


@lru_cache(maxsize=1)
def _clarabel_installed() -> bool:
    return importlib.util.find_spec("clarabel") is not None


def _check_solver(solver) -> None:
    """Refuse a solver cvxpy does not have. The default, Clarabel (a requirement), is checked
    without importing cvxpy: a Frobenius SVM is solved exactly and never needs it."""
    if solver == "CLARABEL" and _clarabel_installed():
        return
    if not isinstance(solver, str) or solver not in _installed_solvers():
        raise ValueError(f"solver must name an installed cvxpy solver, one of "
                         f"{list(_installed_solvers())}; got {solver!r}")


# With A scaled to max |A| = 1, a least-norm point of norm ||w|| leaves margins of 1 / ||w||
# against the data. Beyond ~1e13 that is the data's own rounding: float64 calls such a problem
# infeasible. Between SOLVABLE_LIMIT and that, it cannot decide either way, and says so.
FEASIBILITY_LIMIT = 1e13
SOLVABLE_LIMIT = 1e10


def _min_norm_point(A: np.ndarray, h: np.ndarray | None = None) -> np.ndarray | None:
    """The point of least norm in ``{w : A w >= h}`` (``h = 1`` by default, ``h >= 0`` with a
    positive entry), or ``None`` if that set is empty (to float64
    precision: ``||w|| max|A| > FEASIBILITY_LIMIT``); raises :class:`IllConditionedError` where
    float64 cannot decide (``||w|| max|A|`` between ``SOLVABLE_LIMIT`` and that).

    Least-distance programming by NNLS (Lawson and Hanson, *Solving Least Squares Problems*,
    ch. 23): with ``E = [A^T; h^T]`` and ``f = e_last``, the NNLS residual ``r = E u - f`` is 0
    exactly when the system is infeasible, and otherwise ``w = -r[:-1] / r[-1]``. An exact
    active-set method, ~20x faster than a linear program at these sizes. ``A`` is divided by its
    largest entry first, so data of any scale (1e-200 or 1e200) stays in range.
    """
    top = np.abs(A).max() if A.size else 0.0
    if not top > 0:
        return None
    h = np.ones(A.shape[0]) if h is None else h
    E = np.vstack([A.T / top, h[None, :]])
    f = np.zeros(E.shape[0])
    f[-1] = 1.0
    u, _ = scipy.optimize.nnls(E, f)
    # r = E u - f satisfies r_last = -||r||^2 at the optimum, and w = h / ||r||^2 with the head
    # h = A^T u / top of r. When ||r||^2 is small, r_last = sum(u) - 1 cancels: take it from
    # ||r||^2 = ||h||^2 + ||r||^4 instead (its small root, accurate there).
    head = E[:-1] @ u
    squared = float(head @ head)
    if squared * FEASIBILITY_LIMIT ** 2 <= 1:
        return None
    if squared * SOLVABLE_LIMIT ** 2 <= 1:
        raise IllConditionedError(
            f"the constraints can only be met, if at all, with ||W|| ~ {1 / np.sqrt(squared):.1e} "
            f"times 1 / (largest token difference x query, {top:.3g}): margins that small are "
            "at the data's rounding level, so float64 cannot decide feasibility (near-duplicate "
            "tokens, or a token almost in the hull of the others)")
    r2 = 1.0 - float(h @ u)                # = ||r||^2; accurate unless it is small ...
    if r2 < 1e-4:                          # ... where the small root of r2 = |h|^2 + r2^2 is
        r2 = 2 * squared / (1 + np.sqrt(max(1 - 4 * squared, 0.0)))
    return head / r2 / top


def _feasible(A: np.ndarray) -> bool:
    """Is ``{w : A w >= 1}`` non-empty?"""
    return _min_norm_point(A) is not None


def _scaled_norm(x: np.ndarray, norm: str | None = None) -> float:
    """``||x||`` without overflow or underflow in the squares (entries of 1e200 or 1e-200)."""
    top = np.abs(x).max() if x.size else 0.0
    if not top > 0:
        return 0.0
    return float(top * np.linalg.norm(x / top, norm))


@compiled_per_thread(maxsize=128)
def _compiled(rows: int, shape: tuple[int, ...], norm: str, dual: bool):
    """A cvxpy problem for ``min ||w|| s.t. A vec(w) >= 1`` with ``A`` a Parameter, compiled once
    per size; returns ``(problem, A, solution)`` where ``solution()`` reads ``w`` off the solve.

    ``dual=True`` (nuclear norm only) states the dual, ``max 1^T lam s.t. lam >= 0,
    ||sum_k lam_k A_k||_op <= 1``, as the LMI ``[[I, S], [S^T, I]] >> 0``; the primal solution is
    ``-2`` times the off-diagonal block of that constraint's multiplier. Same optimum, ~3x faster
    with Clarabel, which then factorizes a system in ``lam`` instead of in ``w`` and its bounds.
    """
    A = cp.Parameter((rows, int(np.prod(shape))))
    if dual:
        lam = cp.Variable(rows, nonneg=True)
        S = cp.reshape(A.T @ lam, shape, order="C")
        lmi = cp.bmat([[np.eye(shape[0]), S], [S.T, np.eye(shape[1])]]) >> 0
        return (cp.Problem(cp.Maximize(cp.sum(lam)), [lmi]), A,
                lambda: None if lmi.dual_value is None else -2 * lmi.dual_value[:shape[0], shape[0]:])
    w = cp.Variable(shape)
    objective = cp.sum_squares(w) if norm == "fro" else cp.normNuc(w)
    flat = w if len(shape) == 1 else cp.vec(w, order="C")
    return cp.Problem(cp.Minimize(objective), [A @ flat >= 1]), A, lambda: w.value


CLARABEL_OPTIONS = {"direct_solve_method": "faer", "max_threads": 1,
                    "tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}
# SCS's linear-system solver, named: left to choose ("auto"), SCS takes MKL's Pardiso wherever MKL
# can be loaded and its own QDLDL elsewhere, and the two round differently (the rank that the
# authors' method reports differs on 8 of 272 A5 instances). QDLDL is SCS's solver wherever MKL is
# absent (and was its only direct solver when the authors ran it); its setup is also 35x faster on
# these small problems.
SCS_OPTIONS = {"linear_solver": "qdldl"}


def solver_options(solver: str) -> dict:
    """The options this library passes to ``solver`` (Clarabel's tolerances, SCS's linear solver)."""
    return {"CLARABEL": CLARABEL_OPTIONS, "SCS": SCS_OPTIONS}.get(str(solver).upper(), {})


def _screen(features: np.ndarray) -> tuple[np.ndarray, float]:
    """The least-norm point of ``features @ w >= 1`` and its norm (the scale handed to the
    solvers); raises :class:`InfeasibleError` or :class:`IllConditionedError`."""
    start = _min_norm_point(features)
    if start is None:
        raise InfeasibleError("the constraints cannot all be satisfied")
    scale = _scaled_norm(start)
    if not np.isfinite(scale) or not np.isfinite(start).all():
        raise IllConditionedError(
            "the solution's norm overflows float64: the data are too small (rescale X or Z)")
    return start, scale


def _solve(features: np.ndarray, shape: tuple[int, ...], norm: str,
           solver: str) -> tuple[np.ndarray, str]:
    """Solve ``min ||w|| s.t. features @ vec(w) >= 1``; returns ``w`` and how it was found
    (``"exact"``, ``"certified"`` or ``"solver"``, as in :class:`~attnsvm.SVMResult`).

    The constraints are rescaled by the norm of the least-norm point, so the solver always sees a
    solution of norm ~1 (instances whose margins are tiny would otherwise need ||w|| ~ 1e5).
    The Frobenius problem *is* the least-distance problem that the exact NNLS screen solves, so
    with the default solver its answer is returned directly once it meets every constraint to 1e-6
    (``solver="SCS"`` still runs SCS, to show its residue). With Clarabel a nuclear-norm problem is
    solved in its dual form (``_compiled``), and its answer must meet the constraints to 1e-6, or
    the problem raises :class:`IllConditionedError` (many nuclear problems at once go to
    :func:`_solve_nuclear` instead). Other solvers get the primal form as the paper writes it. No
    warm start: the same input gives the same answer whatever was solved before.
    """
    start, scale = _screen(features)
    return _solve_screened(features, start, scale, shape, norm, solver)


# The batched interior-point method factorizes a dense m x m Schur complement (O(m^3)); Clarabel
# eliminates the m multipliers into the (p + q)(p + q + 1) / 2 entries of the PSD cone (O(m s^4)).
# With many constraints and a small cone Clarabel is far cheaper (e.g. m = 2,700, p + q = 32).
IPM_MAX_ROWS = 128


def _suits_ipm(m: int, p: int, q: int) -> bool:
    """Whether the certified interior-point method is the cheaper route for ``m`` constraints on a
    ``p x q`` core: at most ``IPM_MAX_ROWS`` constraints, or no more than the cone has entries."""
    return m <= max(IPM_MAX_ROWS, (p + q) * (p + q + 1) // 2)


def _solve_nuclear(items: list[tuple[np.ndarray, np.ndarray, float, tuple[np.ndarray, np.ndarray]]]
                   ) -> list[tuple[np.ndarray, str]]:
    """Nuclear-norm problems ``(features, least-norm point, scale, (U, V))``, already screened, with
    rank-one constraint features ``features[k] = vec(U[k] V[k]^T)``: those of one size that suit it
    (:func:`_suits_ipm`) are solved together by the certified interior-point method (one torch
    operation per step for all of them: cheap per instance in a batch, slower than Clarabel for a
    single small instance), the others, and any without a certificate, by Clarabel, one at a time
    (:func:`_solve_screened`)."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    for index, (_, _, _, (U, V)) in enumerate(items):
        groups.setdefault((U.shape[0], U.shape[1], V.shape[1]), []).append(index)
    results: list[tuple[np.ndarray, str] | None] = [None] * len(items)
    for (m, p, q), members in groups.items():
        certificates = [None] * len(members)
        if _suits_ipm(m, p, q):
            U = torch.from_numpy(np.stack([items[i][3][0] * items[i][2] for i in members]))
            V = torch.from_numpy(np.stack([items[i][3][1] for i in members]))
            certificates = certified_nuclear_svms(U, V)
        for i, certificate in zip(members, certificates):
            features, start, scale, _ = items[i]
            results[i] = ((certificate.W.numpy() * scale, "certified") if certificate is not None
                          else _solve_screened(features, start, scale, (p, q), "nuc", "CLARABEL"))
    return results


def _solve_screened(features: np.ndarray, start: np.ndarray, scale: float, shape: tuple[int, ...],
                    norm: str, solver: str) -> tuple[np.ndarray, str]:
    """:func:`_solve` after the screen, with a cvxpy solver (or the exact Frobenius answer)."""
    scaled = features * scale
    least_solves = norm == "fro" and (scaled @ (start / scale)).min() >= 1 - 1e-6
    if least_solves and solver == "CLARABEL":     # the least-norm point IS the Frobenius solution
        return start.reshape(shape), "exact"
    dual = norm == "nuc" and solver == "CLARABEL" and len(shape) == 2
    problem, A, solution = _compiled(features.shape[0], shape, norm, dual)
    A.value = scaled
    status, w = "solver error", None
    with warnings.catch_warnings():          # accuracy is checked below, on the constraints
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        try:
            problem.solve(solver=solver, warm_start=False, **solver_options(solver))
            status = problem.status
            w = solution() if status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) else None
        except cp.error.SolverError as error:
            status = f"solver error ({error})"
    # The interior-point answer is held to the constraints; another solver's is returned as it
    # comes (a first-order solver misses them by ~1e-5: that residue is what one asks it to show).
    if w is not None and (solver != "CLARABEL" or (scaled @ np.ravel(w)).min() >= 1 - 1e-6):
        return np.asarray(w) * scale, "solver"
    if least_solves:                                 # another solver failed: the exact answer
        return start.reshape(shape), "exact"
    raise IllConditionedError(
        f"{solver} returned {status!r} on a feasible problem whose Frobenius solution has norm "
        f"{scale:.3g} (relative to the largest feature {np.abs(features).max():.3g}): the "
        "margins are too small against the data for an accurate solution (near-duplicate "
        "tokens or nearly dependent queries); separate the tokens more, or use norm='fro'")


def _basis(vectors: np.ndarray) -> np.ndarray:
    """Orthonormal basis (columns) of the span of the rows of ``vectors``."""
    _, sigma, vt = np.linalg.svd(vectors, full_matrices=False)
    return vt[sigma > sigma[0] * 1e-12].T if sigma.size and sigma[0] > 0 else vt[:0].T
