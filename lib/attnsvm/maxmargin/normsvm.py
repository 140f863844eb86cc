"""Att-SVM in other norms: the norm the optimizer picks (book page 'What is proved where'; mirror descent:
Julistiono, Tarzanagh and Azizan 2024; spectral descent: Fan, Schmidt and Thrampoulidis 2025 for
linear models; diagonal factorization: Sheen et al. 2024).

``norm_svm(X, Z, alpha, norm)`` solves ::

    min ||W||   s.t.  (x_{i,alpha_i} - x_it)^T W z_i >= 1   for all i and visible t != alpha_i

for ``norm`` = a number ``p`` (the entrywise lp norm of ``vec(W)``; ``p = 2`` is Att-SVM; ``p =
inf`` the largest entry, the norm of sign descent), or ``"spectral"`` (the largest singular value).
Supported exponents: ``p = 1``, ``P_MIN <= p <= P_MAX`` and ``p = inf`` (in between, the conic
form cvxpy builds for ``||.||_p`` grows huge or breaks, and the polish below loses its accuracy;
use ``p = 1`` or ``p = inf`` for the limits). With
``diagonal=True`` W is restricted to diagonal matrices (the model ``W = diag(k * q)``).
Feasibility does not depend on the norm: it is screened exactly as in ``att_svm`` and raises
:class:`InfeasibleError`. The problem is then handed to cvxpy with the interior-point solver
Clarabel, rescaled by the Frobenius solution's norm, and the answer is checked against the
constraints.

**Polish (1 < p < inf).** The interior-point answer has an accurate objective (~1e-10) but, the
objective being flat near its minimum, a W off by up to ~1e-4 relative. It is polished on its
active set: with ``g(y) = sign(y) |y|^(q - 1)`` (``1/p + 1/q = 1``) the KKT conditions of
``min (1/p) ||w||_p^p s.t. A_S w = 1`` read ``w = g(A_S^T mu)``, and Newton's method solves
``A_S g(A_S^T mu) = 1`` for the multipliers ``mu``. The result is kept only when it is certified:
``mu >= 0``, every constraint met to 1e-12, and the dual bound ``1^T mu / ||A_S^T mu||_q`` equal
to ``||w||_p`` to 1e-12 relative (weak duality then proves the objective optimal, and the unique
KKT point of a strictly convex norm is the solution). The result's ``accuracy`` says
``"polished"`` when it is, ``"solver"`` otherwise; for ``p = 1`` and the spectral norm (not
strictly convex: ``unique=False``, the solution set may not be a point), and for ``p = inf``
(the same), the answer is the solver's, accurate to its tolerance.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from ._cvxpy import compiled_per_thread, cp
from .svm import (SVMResult, _check_sizes, _constrained, _numpy, _result, _selection,
                  token_differences)
from ._svm_core import (CLARABEL_OPTIONS, IllConditionedError, InfeasibleError, _min_norm_point,
                       _scaled_norm)
from ..model.utils import as_tensor, check_flag, check_positive, exact_scale

P_MIN, P_MAX = 1.01, 100.0     # the exponents norm_svm solves (besides p = 1)


def _check_norm(norm, solvable: bool = False) -> float | str:
    if isinstance(norm, str):
        if norm == "spectral":
            return norm
        raise ValueError(f"norm must be a number p >= 1 (entrywise lp) or 'spectral', got {norm!r}")
    if isinstance(norm, bool) or not isinstance(norm, (int, float, np.integer, np.floating)):
        raise ValueError(f"norm must be a number p >= 1 (entrywise lp) or 'spectral', got "
                         f"{type(norm).__name__} {norm!r}")
    if norm == np.inf:
        return float(norm)
    if not np.isfinite(norm) or norm < 1:
        raise ValueError(f"norm must be a number p >= 1 (entrywise lp) or 'spectral', got {norm!r}")
    if solvable and norm != 1 and not P_MIN <= norm <= P_MAX:
        raise ValueError(f"norm_svm solves p = 1, {P_MIN} <= p <= {P_MAX}, p = inf and 'spectral'; "
                         f"got p = {norm!r}: nearer 1 or larger, the conic form of the lp norm "
                         "degenerates. Use p = 1 or p = inf for the limits")
    return float(norm)


def matrix_norm(W, norm) -> torch.Tensor:
    """``||W||`` in the norms of :func:`norm_svm` (entrywise lp with any ``p >= 1``, ``inf``
    included, or ``"spectral"``), batched over leading dimensions. Computed on each matrix divided by its
    largest entry, so entries of 1e300 or 1e-300 neither overflow nor underflow."""
    norm = _check_norm(norm)
    W = as_tensor(W, "W", dtype=torch.float64)
    if W.ndim < 2:
        raise ValueError(f"W must be a matrix (..., d, k), got shape {tuple(W.shape)}")
    if W.numel() == 0:
        raise ValueError(f"W has shape {tuple(W.shape)}: every dimension must be at least 1")
    top = W.abs().amax((-2, -1))
    safe = torch.where(top > 0, top, torch.ones_like(top))
    scaled = W / safe[..., None, None]
    if norm == "spectral":
        value = torch.linalg.matrix_norm(scaled, ord=2)
    elif norm == np.inf:
        value = scaled.flatten(-2).abs().amax(-1)
    else:
        value = scaled.flatten(-2).abs().pow(norm).sum(-1).pow(1 / norm)
    return value * safe


def norm_svm(X, Z, alpha, norm, diagonal: bool = False, support_tol: float = 1e-5,
             mask=None) -> SVMResult:
    """Att-SVM in the lp (``norm = p``) or spectral (``"spectral"``) norm; see the module docstring.

    Returns an :class:`SVMResult` whose ``norm`` field reads ``"l<p>"`` or ``"spectral"``; its
    ``accuracy`` is ``"polished"`` (W certified to ~1e-9 relative) or ``"solver"`` and its
    ``unique`` is False for ``p = 1`` and the spectral norm. The problem is solved on the data
    rescaled by exact powers of two, so data of 1e-300 or 1e300 give the same digits.
    """
    norm = _check_norm(norm, solvable=True)
    diagonal = check_flag(diagonal, "diagonal")
    support_tol = check_positive(support_tol, "support_tol", upper=1.0)
    if diagonal and norm == "spectral":
        raise ValueError("diagonal=True takes an lp norm (the spectral norm of a diagonal W is "
                         "the largest |W_kk|, not one of the norms solved here)")
    X, Z = _numpy(X, "X"), _numpy(Z, "Z")
    if X.ndim != 3 or Z.shape != (X.shape[0], X.shape[2]):
        raise ValueError(f"X must be (n, T, d) and Z (n, d); got {X.shape} and {Z.shape}")
    _check_sizes(X, "X")
    n, T, d = X.shape
    alpha = _selection(alpha, n, T)
    sx, sz = exact_scale(X), exact_scale(Z)                          # exact: same digits
    diffs = token_differences(X * sx, alpha)                         # (n, T - 1, d)
    Zs = Z * sz
    keep = _constrained(mask, alpha, n, T)
    if diagonal:
        features = (diffs * Zs[:, None, :])[keep]                    # (rows, d)
    else:
        features = np.einsum("ntd,ne->ntde", diffs, Zs)[keep].reshape(-1, d * d)
    if not features.size:
        raise ValueError("no constraint: every query sees only its selected token")
    start = _min_norm_point(features)
    if start is None:
        raise InfeasibleError("the SVM is infeasible (in every norm): no W"
                              + (" of diagonal form" if diagonal else "")
                              + " gives every selected token a larger logit than the others")
    scale = _scaled_norm(start)
    if not np.isfinite(scale) or not scale > 0:
        raise IllConditionedError("the solution's norm leaves float64's range; rescale X or Z")
    scaled = features * scale
    solution, dual = _conic(scaled, d, norm, diagonal)
    accuracy = "solver"
    if norm not in ("spectral", 1.0, np.inf):
        polished = polish(scaled, solution, dual, norm)
        if polished is not None:
            solution, accuracy = polished, "polished"
    solution = solution * scale * (sx * sz)
    if not np.isfinite(solution).all():
        raise IllConditionedError("the solution overflows float64: the data are ~1e-300 or "
                                  "smaller; rescale X or Z")
    W = np.diag(solution) if diagonal else solution.reshape(d, d)
    margins = np.where(keep, np.einsum("ntd,de,ne->nt", diffs, W / (sx * sz), Zs), np.inf)
    label = "spectral" if norm == "spectral" else f"l{norm:g}"
    value = float(matrix_norm(torch.from_numpy(W), norm))
    return _result(W, margins, alpha, label, value, support_tol,
                   unique=norm not in ("spectral", 1.0, np.inf), accuracy=accuracy)


@compiled_per_thread(maxsize=64)
def _conic_problem(rows: int, d: int, norm, diagonal: bool):
    """The cvxpy problem ``min ||w|| s.t. A w >= 1`` with ``A`` a Parameter ``(rows, d or d * d)``,
    compiled once per size and norm (cvxpy reuses the compilation for every new ``A``)."""
    w = cp.Variable(d) if diagonal else cp.Variable((d, d))
    flat = w if diagonal else cp.vec(w, order="C")
    if norm == "spectral":
        objective = cp.sigma_max(w)
    elif norm == 1:
        objective = cp.norm1(flat)
    elif norm == np.inf:
        objective = cp.norm_inf(flat)
    elif norm == 2:
        objective = cp.sum_squares(flat)
    else:
        objective = cp.pnorm(flat, norm)
    A = cp.Parameter((rows, flat.shape[0]))
    constraint = A @ flat >= 1
    return cp.Problem(cp.Minimize(objective), [constraint]), A, w, constraint


def _conic(A: np.ndarray, d: int, norm, diagonal: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Clarabel's solution of ``min ||w|| s.t. A w >= 1`` (``w`` flat, ``d`` or ``d * d``) and the
    constraints' multipliers (None if the solver gives none)."""
    problem, parameter, w, constraint = _conic_problem(A.shape[0], d, norm, diagonal)
    parameter.value = A
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        try:
            problem.solve(solver="CLARABEL", warm_start=False, **CLARABEL_OPTIONS)
        except (cp.error.SolverError, ArithmeticError) as error:
            raise IllConditionedError(f"Clarabel failed on the {norm} SVM: {error}") from None
    if w.value is None or (A @ np.ravel(w.value)).min() < 1 - 1e-6:
        raise IllConditionedError(f"Clarabel returned {problem.status!r} on a feasible {norm} "
                                  "SVM whose constraints it does not meet to 1e-6")
    dual = None if constraint.dual_value is None else np.ravel(constraint.dual_value).copy()
    return np.ravel(w.value).copy(), dual


def polish(A: np.ndarray, w0: np.ndarray, dual: np.ndarray | None, p: float,
           iterations: int = 60) -> np.ndarray | None:
    """Polish a near-solution ``w0`` of ``min ||w||_p s.t. A w >= 1`` (``1 < p < inf``) on its
    active set by Newton's method on the KKT system (see the module docstring); returns the
    certified solution, or None when the certificate fails (then keep ``w0``).

    ``dual`` holds the solver's multipliers of ``min ||w||_p`` (``p != 2``) or of
    ``min ||w||_2^2`` (``p = 2``); they set the active set ``S`` (positive multipliers) and the
    start ``mu`` of the multipliers of ``min (1/p) ||w||_p^p``. Newton runs in the multipliers
    (``A_S g(A_S^T mu) = 1``, smooth for ``p <= 2``) or in ``(w, mu)``
    (``|w|^(p-1) sign(w) = A_S^T mu``, ``A_S w = 1``, smooth for ``p >= 2``), the other form as a
    fallback. Rows whose multiplier turns negative leave ``S``; violated rows join it.
    """
    q = p / (p - 1)
    if dual is None or not np.isfinite(dual).all() or not dual.max() > 0:
        return None
    active = dual > 1e-7 * dual.max()
    factor = 0.5 if p == 2 else _lp(w0, p) ** (p - 1)
    mu_all = np.where(active, dual * factor, 0.0)
    for _ in range(4):                                       # active-set corrections
        if not active.any():
            return None
        rows = A[active]
        forms = (_newton_dual, _newton_primal) if p < 2 else (_newton_primal, _newton_dual)
        for form in forms:
            found = form(rows, w0, mu_all[active], p, iterations)
            if found is not None:
                break
        else:
            return None
        w, mu = found
        violated = (A @ w < 1 - 1e-12) & ~active
        negative = mu < 0
        if not violated.any() and not negative.any():
            return w if _certified(A, rows, w, mu, p, q) else None
        index = np.flatnonzero(active)
        mu_all[active] = np.maximum(mu, 0.0)
        active[index[negative]] = False
        active |= violated
    return None


def _g(y: np.ndarray, q: float) -> np.ndarray:
    """``sign(y) |y|^(q - 1)``: the gradient of ``(1/q) ||y||_q^q``, inverse of the lp map."""
    return np.sign(y) * np.abs(y) ** (q - 1)


def _damped(residual, x: np.ndarray, step_of, iterations: int) -> np.ndarray | None:
    """Damped Newton: ``x <- x + t step_of(x, F)`` with backtracking on ``max |F|``; None unless it
    reaches ``max |F| <= 1e-13``."""
    F = residual(x)
    for _ in range(iterations):
        size = np.abs(F).max()
        if size <= 1e-13:
            return x
        step = step_of(x, F)
        t = 1.0
        while t > 1e-6:
            trial = x + t * step
            F_trial = residual(trial)
            if np.isfinite(F_trial).all() and np.abs(F_trial).max() < (1 - 1e-4 * t) * size:
                break
            t /= 2
        else:
            return None
        x, F = trial, F_trial
    return x if np.abs(F).max() <= 1e-13 else None


def _newton_dual(rows: np.ndarray, w0: np.ndarray, mu: np.ndarray, p: float,
                 iterations: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Newton on ``F(mu) = rows g(rows^T mu) - 1`` (least-squares steps: dependent rows are fine)."""
    q = p / (p - 1)

    def residual(m):
        return rows @ _g(rows.T @ m, q) - 1.0

    def step_of(m, F):
        y = rows.T @ m
        floor = 1e-12 * max(np.abs(y).max(), 1e-300)
        J = (rows * ((q - 1) * np.maximum(np.abs(y), floor) ** (q - 2))) @ rows.T
        return np.linalg.lstsq(J, -F, rcond=None)[0]

    mu = _damped(residual, mu, step_of, iterations)
    return None if mu is None else (_g(rows.T @ mu, q), mu)


def _newton_primal(rows: np.ndarray, w0: np.ndarray, mu: np.ndarray, p: float,
                   iterations: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Newton on ``(c u(w) - rows^T mu, rows w - 1) = 0`` in ``(w, mu)``, ``u(w) = sign(w)
    |w|^(p-1)`` scaled by ``c = 1 / max |u(w0)|`` so both blocks are of order 1."""
    k, m = rows.shape
    c = 1.0 / max(float(np.abs(w0).max()) ** (p - 1), 1e-300)

    def residual(x):
        w, mu_ = x[:m], x[m:]
        return np.concatenate([c * np.sign(w) * np.abs(w) ** (p - 1) - rows.T @ mu_, rows @ w - 1.0])

    def step_of(x, F):
        H = c * (p - 1) * np.abs(x[:m]) ** (p - 2)
        J = np.block([[np.diag(H), -rows.T], [rows, np.zeros((k, k))]])
        return np.linalg.lstsq(J, -F, rcond=None)[0]

    x = _damped(residual, np.concatenate([w0, mu * c]), step_of, iterations)
    return None if x is None else (x[:m], x[m:] / c)


def _certified(A: np.ndarray, rows: np.ndarray, w: np.ndarray, mu: np.ndarray, p: float,
               q: float) -> bool:
    """Primal feasibility (every margin >= 1 - 1e-12) and a dual bound equal to the objective to
    1e-12 relative: ``lambda = mu / ||rows^T mu||_q`` is dual feasible (``||A^T lambda||_q <= 1``,
    ``lambda >= 0``), so ``1^T lambda <= min ||w||_p <= ||w / min margin||_p``."""
    low = float((A @ w).min())
    if not low >= 1 - 1e-12 or (mu < 0).any():
        return False
    upper = _lp(w, p) / min(low, 1.0)
    lower = float(mu.sum()) / _lp(rows.T @ mu, q)
    return bool(np.isfinite(upper) and np.isfinite(lower) and abs(upper - lower) <= 1e-12 * upper)


def _lp(x: np.ndarray, p: float) -> float:
    top = float(np.abs(x).max())
    return 0.0 if not top > 0 else top * float((np.abs(x / top) ** p).sum() ** (1 / p))
