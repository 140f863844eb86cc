"""Two more views of Att-SVM* (nuclear norm, paper A's (K, Q) theorem; chapter 3 and 3b).

- :func:`nuclear_dual`: the dual ``max 1^T lam s.t. lam >= 0, ||sum_k lam_k F_k||_op <= 1`` with the
  constraint features ``F_k = (x_{i,alpha_i} - x_it) z_i^T``; its certificate
  ``Lambda = sum_k lam_k F_k`` bounds the rank of every solution at once. Solved by Clarabel (SCS as a
  fallback) on data of unit scale, and returned only when verified: ``lam >= 0`` and
  ``||Lambda||_op <= 1`` to ``1e-6``; otherwise :class:`~attnsvm.IllConditionedError`.
- :func:`first_order_nuclear_svm`: the primal problem over all ``d x d`` matrices, solved the way the
  authors' code solves it (cvxpy with the first-order solver SCS at its default settings, cold). It
  exists to show that method's residue; its answer is *not* verified, and the result says so
  (``W`` is None when SCS returns no solution, with SCS's status).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from .duality import _scaled_features
from ._cvxpy import compiled_per_thread, cp
from .svm import _selection
from ._svm_core import IllConditionedError, solver_options

FEASIBILITY_TOL = 1e-6


@dataclass(frozen=True)
class NuclearDual:
    """The verified dual of Att-SVM*: ``value`` (= the optimal nuclear norm, by strong duality),
    ``multipliers`` ``lam`` (one per constraint, in the order of the examples and tokens) and
    ``certificate`` ``Lambda = sum_k lam_k F_k`` ``(d, d)``, with the solver that produced them."""

    value: float
    multipliers: torch.Tensor
    certificate: torch.Tensor
    solver: str


@dataclass(frozen=True)
class FirstOrderNuclear:
    """The authors' way of solving Att-SVM*: ``W`` as SCS returns it (None without a solution) and
    SCS's ``status``. Not verified: first-order residue of ~1e-5 is what it is there to show."""

    W: torch.Tensor | None
    status: str


def _features(X, Z, alpha) -> tuple[np.ndarray, int, float]:
    """The constraint features ``(rows, d * d)`` on data of unit scale (one row per ``t != alpha_i``),
    ``d``, and the scale factor (``duality._scaled_features`` computes and checks them)."""
    features, scale = _scaled_features(X, Z, alpha)                  # (n, T, d, d), F_{i,alpha_i} = 0
    n, T, d, _ = features.shape
    keep = np.ones((n, T), dtype=bool)
    keep[np.arange(n), _selection(alpha, n, T)] = False
    return features[keep].reshape(-1, d * d), d, scale


@compiled_per_thread(maxsize=32)
def _dual_problem(rows: int, d: int):
    F = cp.Parameter((rows, d * d))
    lam = cp.Variable(rows, nonneg=True)
    G = cp.reshape(F.T @ lam, (d, d), order="C")
    return cp.Problem(cp.Maximize(cp.sum(lam)), [cp.sigma_max(G) <= 1]), F, lam


def nuclear_dual(X, Z, alpha) -> NuclearDual:
    """The dual of Att-SVM*(alpha) for tokens ``X (n, T, d)`` and queries ``Z (n, d)``, verified.

    Raises :class:`~attnsvm.IllConditionedError` when neither solver returns a verified answer.
    """
    F, d, scale = _features(X, Z, alpha)
    problem, param, lam = _dual_problem(F.shape[0], d)
    param.value = F
    attempts = []
    for solver, options in (("CLARABEL", solver_options("CLARABEL")),
                            ("SCS", {**solver_options("SCS"), "eps": 1e-9})):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            try:
                problem.solve(solver=solver, warm_start=False, **options)
            except cp.error.SolverError as error:
                attempts.append(f"{solver}: solver error ({str(error)[:60]})")
                continue
        if lam.value is None:
            attempts.append(f"{solver}: status {problem.status}")
            continue
        multipliers = np.maximum(np.asarray(lam.value), 0.0)
        certificate = np.tensordot(multipliers, F.reshape(-1, d, d), axes=1)
        if np.linalg.norm(certificate, 2) > 1 + FEASIBILITY_TOL:
            attempts.append(f"{solver}: answer not verified (||Lambda||_op > 1)")
            continue
        # on data scaled by s the features are s F: the true multipliers are s times the scaled ones
        return NuclearDual(value=float(multipliers.sum()) * scale,
                           multipliers=torch.from_numpy(multipliers * scale),
                           certificate=torch.from_numpy(certificate), solver=solver)
    raise IllConditionedError("no verified solution of the dual of Att-SVM*: " + "; ".join(attempts))


@compiled_per_thread(maxsize=32)
def _primal_problem(rows: int, d: int):
    F = cp.Parameter((rows, d * d))
    W = cp.Variable((d, d))
    return cp.Problem(cp.Minimize(cp.normNuc(W)), [F @ cp.vec(W, order="C") >= 1]), F, W


def first_order_nuclear_svm(X, Z, alpha) -> FirstOrderNuclear:
    """Att-SVM*(alpha) as the authors' code solves it: the primal over all ``d x d`` matrices, cvxpy
    and SCS at its default settings, solved cold (a fresh script's answer; no warm start), with
    SCS's own direct linear solver (QDLDL) named, so that a machine with MKL solves the same way."""
    F, d, scale = _features(X, Z, alpha)
    problem, param, W = _primal_problem(F.shape[0], d)
    param.value = F
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        try:
            problem.solve(solver=cp.SCS, warm_start=False, **solver_options("SCS"))
        except cp.error.SolverError as error:
            return FirstOrderNuclear(None, f"solver error ({str(error)[:60]})")
    if W.value is None:
        return FirstOrderNuclear(None, str(problem.status))
    return FirstOrderNuclear(torch.from_numpy(np.array(W.value) * scale), str(problem.status))
