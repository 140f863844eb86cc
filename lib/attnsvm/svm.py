"""The max-margin problems of attention (paper A section 3, paper B section 3; THEORY.md section 2).

``Att-SVM`` (Frobenius) and ``Att-SVM*`` (nuclear norm) for a selection ``alpha``::

    W_mm(alpha) = argmin ||W||   s.t.  (x_{i,alpha_i} - x_it)^T W z_i >= 1   for all i, t != alpha_i

Each constraint is linear in ``W``: ``<W, (x_{i,alpha_i} - x_it) z_i^T> >= 1``, so the problem is a
hard-margin SVM on outer-product features. The constraints are built as one matrix ``A`` with
``A vec(W) >= 1`` and solved by cvxpy with the interior-point solver Clarabel, in the subspace that the data span, (an explicit solver:
SCS, cvxpy's default for nuclear norms, leaves ~1e-5 residue in the singular values). Compiled
problems are cached per size, with ``A`` a cvxpy ``Parameter``, so repeated solves skip compilation.

Infeasibility is screened first by an exact least-distance (NNLS) solve, whose least-norm point
also sets the scale handed to the solver (both in ``svm_core``); an infeasible problem raises
:class:`InfeasibleError` naming the example that blocks it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .data import Problem
from .metrics import numerical_rank
from .svm_core import (IllConditionedError, InfeasibleError, _basis, _check_solver, _feasible,
                       _scaled_norm, _solve)
from .utils import as_array, as_mask, as_tensor, check_positive, exact_scale


@dataclass(frozen=True)
class SVMResult:
    """Solution of a max-margin problem with its diagnostics.

    Attributes:
        W: the solution (``(d, d)`` for Att-SVM, ``(d,)`` for the p-SVM), float64.
        norm: ``"fro"`` or ``"nuc"``.
        objective: the optimal norm ``||W||``.
        margins: ``(x_{i,alpha_i} - x_it)^T W z_i``, shape ``(n, T)``, ``+inf`` at ``t = alpha_i``.
        support: active constraints (margin within ``support_tol`` of 1), shape ``(n, T)``.
        rank: numerical rank of ``W`` (relative tolerance ``rank_tol``); 1 for vectors.
        unique: False where the norm is not strictly convex (l1, spectral, nuclear): the solution
            set may then hold more than one point and ``W`` is one of them; True otherwise.
        accuracy: how ``W`` was obtained. ``"exact"``: an exact least-distance (NNLS) solve,
            correct to float64 rounding (Frobenius); ``"polished"``: an interior-point solve
            polished by Newton's method on the active constraints and certified by its dual, ``W``
            correct to about 1e-9 relative (lp with 1 < p < inf, see ``norm_svm``); ``"solver"``:
            the interior-point answer as returned, its objective accurate to the solver's
            tolerance (~1e-8 relative) and ``W`` to what a flat objective allows.
    """

    W: torch.Tensor
    norm: str
    objective: float
    margins: torch.Tensor
    support: torch.Tensor
    rank: int
    unique: bool = True
    accuracy: str = "exact"

    @property
    def min_margin(self) -> float:
        return float(self.margins.min())


def _numpy(value, name: str) -> np.ndarray:
    return as_tensor(value, name, dtype=torch.float64, device="cpu").numpy()


def _check_sizes(X: np.ndarray, name: str) -> None:
    n, T, d = X.shape
    if n < 1 or d < 1 or T < 2:
        raise ValueError(f"{name} has shape {X.shape}: need n >= 1 examples, T >= 2 tokens to "
                         "select from and d >= 1")


def _selection(alpha, n: int, T: int) -> np.ndarray:
    alpha = as_array(alpha, "alpha").detach().cpu().numpy()
    if alpha.shape != (n,) or alpha.dtype.kind not in "iu":
        raise ValueError(f"alpha must be {n} integer token indices (one per example), got "
                         f"shape {alpha.shape} and dtype {alpha.dtype}")
    if (alpha < 0).any() or (alpha >= T).any():
        raise ValueError(f"alpha must hold token indices in [0, {T - 1}], got {alpha.tolist()}")
    return alpha.astype(np.int64)


def token_differences(X: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``x_{i,alpha_i} - x_it`` for every ``t != alpha_i``, shape ``(n, T - 1, d)``."""
    n, T, _ = X.shape
    keep = np.ones((n, T), dtype=bool)
    keep[np.arange(n), alpha] = False
    others = X[keep].reshape(n, T - 1, -1)
    return X[np.arange(n), alpha][:, None, :] - others


def _blocking_example(blocks: list[np.ndarray], diffs: np.ndarray, Z: np.ndarray | None) -> str:
    """Explain infeasibility: the first example that cannot be added to the earlier ones.
    ``Z`` is ``None`` for the p-SVM (one vector p shared by every example, no queries)."""
    for i, block in enumerate(blocks):
        if not block.size:                    # a query that sees only its selected token
            continue
        if Z is not None and not np.any(Z[i]):
            return f"example {i} has a zero query z_i, so its logits cannot separate any token"
        same = np.flatnonzero(np.abs(diffs[i]).max(axis=1) == 0)
        if same.size:
            return (f"example {i}: its selected token appears twice in the sequence, so no "
                    f"{'W' if Z is not None else 'p'} can give it a larger logit than its copy")
        if not _feasible(block):
            return (f"example {i}: its selected token lies in the convex hull of the other tokens "
                    f"of the sequence (to float64 precision), so no "
                    f"{'query direction' if Z is not None else 'p'} exposes it")
        if not _feasible(np.concatenate(blocks[: i + 1])):
            if Z is None:
                return (f"example {i} conflicts with examples 0..{i - 1}: no single p exposes "
                        "all their selected keys at once")
            return (f"example {i} conflicts with examples 0..{i - 1} (the queries are linearly "
                    "dependent and ask for incompatible directions)")
    return "the solver reported infeasibility"


def _result(solution: np.ndarray, other_margins: np.ndarray, alpha: np.ndarray, norm: str,
            objective: float, support_tol: float, rank_tol: float = 1e-5, unique: bool = True,
            accuracy: str = "exact") -> SVMResult:
    """Assemble an :class:`SVMResult` from the margins of the non-selected tokens ``(n, T - 1)``."""
    n, T = other_margins.shape[0], other_margins.shape[1] + 1
    margins = np.full((n, T), np.inf)
    keep = np.ones((n, T), dtype=bool)
    keep[np.arange(n), alpha] = False
    margins[keep] = other_margins.ravel()
    W = torch.from_numpy(solution)
    return SVMResult(W=W, norm=norm, objective=objective, margins=torch.from_numpy(margins),
                     support=torch.from_numpy(margins <= 1 + support_tol),
                     rank=int(numerical_rank(W, rank_tol)) if W.ndim == 2 else 1,
                     unique=unique, accuracy=accuracy)


def att_svm(X, Z, alpha, norm: str = "fro", rank_tol: float = 1e-5,
            support_tol: float = 1e-5, solver: str = "CLARABEL", mask=None) -> SVMResult:
    """Solve Att-SVM (``norm="fro"``) or Att-SVM* (``norm="nuc"``) for the selection ``alpha``.

    Args:
        X: tokens ``(n, T, d)``; Z: queries ``(n, d)``; alpha: selected token per example ``(n,)``.
        norm: ``"fro"`` (paper A, Theorem 1: the W path) or ``"nuc"`` (Theorem 2: the (K, Q) path).
        rank_tol: relative tolerance of the reported numerical rank.
        support_tol: a constraint with margin below ``1 + support_tol`` is a support token.
        solver: a cvxpy solver name; the interior-point ``"CLARABEL"`` (its solution is checked
            against the constraints to 1e-6) unless you want to see what a first-order solver
            (``"SCS"``, unchecked; primal form on the data subspace) leaves in the singular values.
        mask: boolean ``(n, T)``, the tokens each query may attend to (``Problem.mask``, e.g.
            causal attention); masked tokens get no constraint (margin ``+inf``). None = all.

    Raises:
        InfeasibleError: no W satisfies the constraints; the message names the blocking example.
    """
    if norm not in ("fro", "nuc"):
        raise ValueError(f"norm must be 'fro' or 'nuc', got {norm!r}")
    rank_tol = check_positive(rank_tol, "rank_tol", upper=1.0)
    support_tol = check_positive(support_tol, "support_tol", upper=1.0)
    _check_solver(solver)
    X, Z = _numpy(X, "X"), _numpy(Z, "Z")
    if X.ndim != 3 or Z.shape != (X.shape[0], X.shape[2]):
        raise ValueError(f"X must be (n, T, d) and Z (n, d); got {X.shape} and {Z.shape} "
                         "(solve batched problems one instance at a time)")
    _check_sizes(X, "X")
    n, T, d = X.shape
    alpha = _selection(alpha, n, T)
    keep = _constrained(mask, alpha, n, T)                                # (n, T-1)
    if not keep.any():
        raise ValueError("no constraint: every query sees only its selected token (nothing to "
                         "separate); the SVM is undefined")
    # data whose products x z^T would overflow or underflow (1e300, 1e-300) are solved rescaled
    # by exact powers of two, the answer W scaled back by the same factors (the constraints are
    # bilinear in X, Z, W); other data are solved as they are (the solver normalizes them anyway)
    top = float(np.abs(X).max()) * float(np.abs(Z).max())
    extreme = not (top == 0 or 1e-290 <= top <= 1e290)
    sx, sz = (exact_scale(X), exact_scale(Z)) if extreme else (1.0, 1.0)
    X, Z = X * sx, Z * sz
    diffs = token_differences(X, alpha)                                   # (n, T-1, d)
    # Both norms are unitarily invariant, so projecting W onto span(differences) x span(queries)
    # keeps every constraint and never increases the norm: solve for the small core M only.
    left, right = _basis(diffs.reshape(-1, d)), _basis(Z)
    reduced = np.einsum("ntu,nv->ntuv", diffs @ left, Z @ right)[keep].reshape(int(keep.sum()), -1)
    try:
        core = _solve(reduced, (left.shape[1], right.shape[1]), norm, solver)
    except InfeasibleError:
        features = np.einsum("ntd,ne->ntde", diffs, Z).reshape(n, T - 1, d * d)
        raise InfeasibleError("Att-SVM is infeasible: " + _blocking_example(
            [f[k] for f, k in zip(features, keep)], [g[k] for g, k in zip(diffs, keep)], Z)) from None
    W = left @ core @ right.T
    margins = np.where(keep, np.einsum("ntd,de,ne->nt", diffs, W, Z), np.inf)
    W = W * (sx * sz)
    if not np.isfinite(W).all():
        raise IllConditionedError("the solution's entries overflow float64: the data are too small "
                                  "(~1e-300 or less); rescale X or Z")
    exact = norm == "fro" and solver == "CLARABEL"
    return _result(W, margins, alpha, norm, _scaled_norm(W, norm), support_tol, rank_tol,
                   unique=norm == "fro", accuracy="exact" if exact else "solver")


def _constrained(mask, alpha: np.ndarray, n: int, T: int) -> np.ndarray:
    """Which of the ``T - 1`` differences of each example are constraints ``(n, T - 1)``: all,
    or those to tokens the query may attend to. The selected tokens must be allowed."""
    if mask is None:
        return np.ones((n, T - 1), dtype=bool)
    mask = as_mask(mask, "mask", (n, T), "(n, T): True = the query may attend to the token")
    mask = mask.cpu().numpy()
    if not mask[np.arange(n), alpha].all():
        i = int(np.flatnonzero(~mask[np.arange(n), alpha])[0])
        raise ValueError(f"example {i} selects token {int(alpha[i])}, which its query may not "
                         "attend to (masked)")
    keep = mask.copy()
    keep[np.arange(n), alpha] = False
    others = np.ones((n, T), dtype=bool)
    others[np.arange(n), alpha] = False
    return keep[others].reshape(n, T - 1)


def p_svm(keys, alpha, support_tol: float = 1e-5) -> SVMResult:
    """Paper B's p-SVM: ``p_mm = argmin ||p|| s.t. p^T (k_{i,alpha_i} - k_it) >= 1`` on keys ``(n, T, d)``.

    With identity key matrix the keys are the tokens; this is Att-SVM with the vector ``W z`` free.
    """
    support_tol = check_positive(support_tol, "support_tol", upper=1.0)
    K = _numpy(keys, "keys")
    if K.ndim != 3:
        raise ValueError(f"keys must have shape (n, T, d), got {K.shape}")
    _check_sizes(K, "keys")
    n, T, d = K.shape
    alpha = _selection(alpha, n, T)
    diffs = token_differences(K, alpha)
    A = diffs.reshape(-1, d)
    try:
        p = _solve(A, (d,), "fro", "CLARABEL")
    except InfeasibleError:
        raise InfeasibleError("p-SVM is infeasible: "
                              + _blocking_example(list(diffs), diffs, None)) from None
    return _result(p, diffs @ p, alpha, "fro", _scaled_norm(p), support_tol)


def is_locally_optimal(problem: Problem, alpha, result: SVMResult) -> torch.Tensor:
    """Local optimality of ``alpha`` (paper A Def. 2): ``gamma_{i,alpha_i} > gamma_it`` for every
    support token ``t`` of example ``i``. Returns one boolean per example, shape ``(n,)``.
    """
    if not isinstance(problem, Problem) or not isinstance(result, SVMResult):
        raise TypeError("is_locally_optimal needs a Problem and the SVMResult of att_svm")
    if problem.batch_shape:
        raise ValueError("pass one instance (use problem.trial(b) on batched problems)")
    scores = problem.scores.cpu()
    alpha = torch.from_numpy(_selection(alpha, problem.n, problem.T))
    if tuple(result.support.shape) != (problem.n, problem.T):
        raise ValueError(f"the result is for {tuple(result.support.shape)} (n, T), the problem "
                         f"has {(problem.n, problem.T)}")
    selected = scores.gather(-1, alpha.unsqueeze(-1))
    beaten = (scores < selected) | ~result.support
    return beaten.all(dim=-1)
