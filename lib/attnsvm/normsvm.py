"""Att-SVM in other norms: the norm the optimizer picks (THEORY.md section 3; mirror descent:
Julistiono, Tarzanagh and Azizan 2024; spectral descent: Fan, Schmidt and Thrampoulidis 2025 for
linear models; diagonal factorization: Sheen et al. 2024).

``norm_svm(X, Z, alpha, norm)`` solves ::

    min ||W||   s.t.  (x_{i,alpha_i} - x_it)^T W z_i >= 1   for all i and visible t != alpha_i

for ``norm`` = a number ``p >= 1`` (the entrywise lp norm of ``vec(W)``; ``p = 2`` is Att-SVM),
or ``"spectral"`` (the largest singular value). With ``diagonal=True`` W is restricted to diagonal
matrices (the model ``W = diag(k * q)``). Feasibility does not depend on the norm: it is screened
exactly as in ``att_svm`` and raises :class:`InfeasibleError`. The problem is then handed to cvxpy
with the interior-point solver Clarabel, rescaled by the Frobenius solution's norm, and the answer
is checked against the constraints.
"""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import torch

from .svm import (CLARABEL_OPTIONS, IllConditionedError, InfeasibleError, SVMResult, _constrained,
                  _min_norm_point, _numpy, _result, _scaled_norm, _selection, token_differences)


def _check_norm(norm) -> float | str:
    if norm == "spectral":
        return norm
    if isinstance(norm, bool) or not isinstance(norm, (int, float)) or not np.isfinite(norm) \
            or norm < 1:
        raise ValueError(f"norm must be a number p >= 1 (entrywise lp) or 'spectral', got {norm!r}")
    return float(norm)


def matrix_norm(W, norm) -> torch.Tensor:
    """``||W||`` in the norms of :func:`norm_svm` (entrywise lp or spectral), batched over leading
    dimensions."""
    norm = _check_norm(norm)
    W = torch.as_tensor(W, dtype=torch.float64)
    if norm == "spectral":
        return torch.linalg.matrix_norm(W, ord=2)
    return W.flatten(-2).abs().pow(norm).sum(-1).pow(1 / norm)


def norm_svm(X, Z, alpha, norm, diagonal: bool = False, support_tol: float = 1e-5,
             mask=None) -> SVMResult:
    """Att-SVM in the lp (``norm = p``) or spectral (``"spectral"``) norm; see the module docstring.

    Returns an :class:`SVMResult` whose ``norm`` field reads ``"l<p>"`` or ``"spectral"``.
    """
    norm = _check_norm(norm)
    if not isinstance(diagonal, bool):
        raise TypeError(f"diagonal must be True or False, got {diagonal!r}")
    if diagonal and norm == "spectral":
        raise ValueError("diagonal=True takes an lp norm (the spectral norm of a diagonal W is "
                         "the largest |W_kk|, not one of the norms solved here)")
    X, Z = _numpy(X, "X"), _numpy(Z, "Z")
    if X.ndim != 3 or Z.shape != (X.shape[0], X.shape[2]):
        raise ValueError(f"X must be (n, T, d) and Z (n, d); got {X.shape} and {Z.shape}")
    n, T, d = X.shape
    alpha = _selection(alpha, n, T)
    diffs = token_differences(X, alpha)                              # (n, T - 1, d)
    keep = _constrained(mask, alpha, n, T)
    if diagonal:
        features = (diffs * Z[:, None, :])[keep]                     # (rows, d)
    else:
        features = np.einsum("ntd,ne->ntde", diffs, Z)[keep].reshape(-1, d * d)
    if not features.size:
        raise ValueError("no constraint: every query sees only its selected token")
    start = _min_norm_point(features)
    if start is None:
        raise InfeasibleError("the SVM is infeasible (in every norm): no W"
                              + (" of diagonal form" if diagonal else "")
                              + " gives every selected token a larger logit than the others")
    scale = _scaled_norm(start)
    w = cp.Variable(d) if diagonal else cp.Variable((d, d))
    flat = w if diagonal else cp.vec(w, order="C")
    if norm == "spectral":
        objective = cp.sigma_max(w)
    elif norm == 1:
        objective = cp.norm1(flat)
    elif norm == 2:
        objective = cp.sum_squares(flat)
    else:
        objective = cp.pnorm(flat, norm)
    problem = cp.Problem(cp.Minimize(objective), [(features * scale) @ flat >= 1])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        try:
            problem.solve(solver="CLARABEL", **CLARABEL_OPTIONS)
        except cp.error.SolverError as error:
            raise IllConditionedError(f"Clarabel failed on the {norm} SVM: {error}") from None
    if w.value is None or (features * scale @ np.ravel(w.value)).min() < 1 - 1e-6:
        raise IllConditionedError(f"Clarabel returned {problem.status!r} on a feasible {norm} "
                                  "SVM whose constraints it does not meet to 1e-6")
    solution = np.asarray(w.value) * scale
    W = np.diag(solution) if diagonal else solution
    margins = np.where(keep, np.einsum("ntd,de,ne->nt", diffs, W, Z), np.inf)
    label = "spectral" if norm == "spectral" else f"l{norm:g}"
    value = float(matrix_norm(torch.from_numpy(W), norm))
    return _result(W, margins, alpha, label, value, support_tol)
