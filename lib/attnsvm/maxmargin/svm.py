"""The max-margin problems of attention (paper A section 3, paper B section 3; book chapters 1-2).

``Att-SVM`` (Frobenius) and ``Att-SVM*`` (nuclear norm) for a selection ``alpha``::

    W_mm(alpha) = argmin ||W||   s.t.  (x_{i,alpha_i} - x_it)^T W z_i >= 1   for all i, t != alpha_i

Each constraint is linear in ``W``: ``<W, (x_{i,alpha_i} - x_it) z_i^T> >= 1``, so the problem is a
hard-margin SVM on rank-one outer-product features, solved in the subspace that the data span
(``svm_reduce``). Infeasibility is screened first by an exact least-distance (NNLS) solve, whose
least-norm point is the Frobenius solution and sets the scale handed to the other solvers; the
nuclear norm goes to the interior-point solver Clarabel, or, for many instances at once
(:func:`att_svms`), to a certified primal-dual interior-point method (``nuclear_ipm``), with
Clarabel where it has no certificate (all in ``svm_core``). An explicit first-order solver (SCS,
cvxpy's default for nuclear norms) can be asked for: it leaves ~1e-5 residue in the singular
values. An infeasible problem raises
:class:`InfeasibleError` naming the example that blocks it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..model.data import Problem
from ..model.metrics import RANK_TOL, numerical_rank
from ._svm_core import (IllConditionedError, InfeasibleError, _check_solver, _scaled_norm, _screen,
                       _solve, _solve_nuclear, _solve_screened)
# the shared checks live in svm_reduce; other solvers of the library import them from here
from ._svm_reduce import (_blocking_example, _check_sizes, _constrained, _Instance, _numpy,  # noqa: F401
                         _reduce, _selection, token_differences)
from ..model.utils import as_array, check_positive


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
            correct to float64 rounding (Frobenius); ``"certified"``: the nuclear norm by the
            library's primal-dual interior-point method (:func:`att_svms`), ``W`` meeting every
            constraint and a dual point bounding the optimum within 1e-9 relative of ``||W||_*``
            (the objective is certified, not ``W`` itself: see ``att_svms``); ``"polished"``: an
            interior-point solve polished by Newton's method on the active constraints and certified by its dual, ``W``
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


def _result(solution: np.ndarray, other_margins: np.ndarray, alpha: np.ndarray, norm: str,
            objective: float, support_tol: float, rank_tol: float = RANK_TOL, unique: bool = True,
            accuracy: str = "exact") -> SVMResult:
    """Assemble an :class:`SVMResult` from the margins of the non-selected tokens ``(n, T - 1)``."""
    n, T = other_margins.shape[0], other_margins.shape[1] + 1
    margins = np.full((n, T), np.inf)
    keep = np.ones((n, T), dtype=bool)
    keep[np.arange(n), alpha] = False
    margins[keep] = other_margins.ravel()
    return SVMResult(W=torch.from_numpy(solution), norm=norm, objective=objective,
                     margins=torch.from_numpy(margins),
                     support=torch.from_numpy(margins <= 1 + support_tol),
                     rank=_rank(solution, rank_tol) if solution.ndim == 2 else 1,
                     unique=unique, accuracy=accuracy)


def _rank(W: np.ndarray, rank_tol: float) -> int:
    """:func:`~attnsvm.model.metrics.numerical_rank` of a solution, read directly off NumPy's singular
    values when its entries are of moderate size (the checks and rescaling of the public function
    only matter for extreme ones; one SVM solve in a loop of thousands saves a third of its time)."""
    top = float(np.abs(W).max())
    if not 2.0 ** -30 <= top <= 2.0 ** 30:
        return int(numerical_rank(torch.from_numpy(W), rank_tol))
    sigma = np.linalg.svd(W, compute_uv=False)
    return int((sigma > rank_tol * sigma[0]).sum())


def att_svm(X, Z=None, alpha=None, norm: str = "fro", rank_tol: float = RANK_TOL,
            support_tol: float = 1e-5, solver: str = "CLARABEL", mask=None) -> SVMResult:
    """Solve Att-SVM (``norm="fro"``) or Att-SVM* (``norm="nuc"``) for the selection ``alpha``.

    Two forms: ``att_svm(X, Z, alpha)`` on arrays, and ``att_svm(problem, alpha)`` on one
    :class:`Problem` (no trials dimension; its mask is used; ``alpha`` defaults to
    ``problem.opt``; for a batched problem use :func:`att_svms`).

    Args:
        X: tokens ``(n, T, d)``; Z: queries ``(n, d)``; alpha: selected token per example ``(n,)``.
        norm: ``"fro"`` (paper A, Theorem 1: the W path) or ``"nuc"`` (Theorem 2: the (K, Q) path).
        rank_tol: relative tolerance of the reported numerical rank.
        support_tol: a constraint with margin below ``1 + support_tol`` is a support token.
        solver: ``"CLARABEL"`` (the default) stands for the library's accurate route: the exact
            least-distance solve (Frobenius) and the interior-point Clarabel (nuclear; its solution
            checked against the constraints to 1e-6; :func:`att_svms` solves many at once with a
            certificate); the result's ``accuracy`` says which answered. Another cvxpy solver
            name (e.g. ``"SCS"``, unchecked; primal form on the data subspace) shows what that
            solver leaves in the singular values.
        mask: boolean ``(n, T)``, the tokens each query may attend to (``Problem.mask``, e.g.
            causal attention); masked tokens get no constraint (margin ``+inf``). None = all.

    Raises:
        InfeasibleError: no W satisfies the constraints; the message names the blocking example.
    """
    rank_tol, support_tol = _check_options(norm, rank_tol, support_tol, solver)
    X, Z, alpha, mask = _arguments(X, Z, alpha, mask)
    instance = _reduce(X, Z, alpha, mask)
    try:
        core, accuracy = _solve(instance.features, instance.shape, norm, solver)
    except InfeasibleError:
        raise instance.infeasible() from None
    return _assemble(instance, core, accuracy, norm, rank_tol, support_tol)


def _arguments(X, Z, alpha, mask) -> tuple:
    """``att_svm``'s two calling forms reduced to arrays ``(X, Z, alpha, mask)``."""
    if isinstance(X, Problem):
        problem = X
        if alpha is not None and Z is not None:
            raise TypeError("att_svm(problem, alpha): pass the selection once (the problem holds Z)")
        Z = alpha if Z is None else Z
        if problem.batch_shape:
            raise ValueError(f"att_svm takes one instance, got a problem with trials "
                             f"{tuple(problem.batch_shape)}: use att_svms(problem, alpha) or "
                             "att_svm(problem.trial(b), alpha)")
        if mask is not None:
            raise ValueError("att_svm(problem, ...) uses the problem's mask; build the problem "
                             "with the mask instead of passing one")
        return problem.X, problem.Z, problem.opt if Z is None else Z, problem.mask
    if isinstance(Z, Problem) or isinstance(alpha, Problem):
        raise TypeError("att_svm takes att_svm(X, Z, alpha) or att_svm(problem, alpha), with the "
                        "problem first")
    if Z is None or alpha is None:
        raise TypeError("att_svm needs the queries Z and the selection alpha: att_svm(X, Z, alpha), "
                        "or att_svm(problem, alpha) with an attnsvm Problem")
    return X, Z, alpha, mask


def att_svms(problem: Problem, alpha, norm: str = "fro", rank_tol: float = RANK_TOL,
             support_tol: float = 1e-5) -> list[SVMResult]:
    """Att-SVM (``"fro"``) or Att-SVM* (``"nuc"``) of every instance of a batched ``problem``
    ``(B, n, T, d)`` for its selection ``alpha[b]`` ``(B, n)``, honouring the problem's mask: the
    problems :func:`att_svm` solves, with the same checks and errors. The Frobenius answers are
    :func:`att_svm`'s exactly. Att-SVM* instances of one size are solved together (one batched
    interior-point run, :mod:`attnsvm.maxmargin._nuclear_ipm`; ``accuracy="certified"``), so many nuclear
    problems cost a fraction of solving each alone; an instance without a certificate (e.g.
    nearly infeasible, or with duplicated constraints) goes to Clarabel as in :func:`att_svm`
    (``accuracy="solver"``). Two solvers, so the answers agree with :func:`att_svm`'s to their
    accuracy, not bit for bit: the objective to ~1e-9 relative, ``W`` to ~1e-6 (its rounding can
    depend on the instance's place in the batch), and where the support or the rank sits at its
    tolerance (degenerate instances) they may differ. Raises :class:`InfeasibleError` naming the
    first infeasible trial."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if len(problem.batch_shape) != 1:
        raise ValueError("att_svms needs a problem with one trials dimension (B, n, T, d); for "
                         "one instance use att_svm")
    rank_tol, support_tol = _check_options(norm, rank_tol, support_tol, "CLARABEL")
    alpha = as_array(alpha, "alpha")
    if tuple(alpha.shape) != (problem.batch_shape[0], problem.n):
        raise ValueError(f"alpha must have shape {(problem.batch_shape[0], problem.n)} (one "
                         f"selection per trial), got {tuple(alpha.shape)}")
    instances, screened = [], []
    for b in range(problem.batch_shape[0]):
        trial = problem.trial(b)
        instance = _reduce(trial.X, trial.Z, alpha[b], trial.mask)
        try:
            screened.append(_screen(instance.features))
        except InfeasibleError:
            raise InfeasibleError(f"trial {b}: {instance.infeasible()}") from None
        except IllConditionedError as error:
            raise IllConditionedError(f"trial {b}: {error}") from None
        instances.append(instance)
    if norm == "nuc":
        solved = _solve_nuclear([(inst.features, start, scale, inst.factors)
                                 for inst, (start, scale) in zip(instances, screened)])
    else:
        solved = [_solve_screened(inst.features, start, scale, inst.shape, "fro", "CLARABEL")
                  for inst, (start, scale) in zip(instances, screened)]
    return [_assemble(inst, core, accuracy, norm, rank_tol, support_tol)
            for inst, (core, accuracy) in zip(instances, solved)]


def _assemble(instance: _Instance, core: np.ndarray, accuracy: str, norm: str, rank_tol: float,
              support_tol: float) -> SVMResult:
    """The :class:`SVMResult` of an instance from its solved core ``M`` (``W = left M right^T``)."""
    W = instance.left @ core @ instance.right.T
    margins = np.where(instance.keep, np.einsum("ntd,de,ne->nt", instance.diffs, W, instance.Z), np.inf)
    W = W * instance.rescale
    if not np.isfinite(W).all():
        raise IllConditionedError("the solution's entries overflow float64: the data are too "
                                  "small (~1e-300 or less); rescale X or Z")
    return _result(W, margins, instance.alpha, norm, _scaled_norm(W, norm), support_tol, rank_tol,
                   unique=norm == "fro", accuracy=accuracy)


def att_svm_feasible(problem: Problem, alpha=None):
    """Is the Att-SVM of the selection ``alpha`` feasible, honouring the problem's mask? The one
    feasibility test of the library, for any selection.

    ``alpha`` defaults to the optimal tokens (:attr:`Problem.opt`); otherwise ``(n,)`` for one
    instance, ``(B, n)`` (or ``(n,)``, the same for every trial) for a problem with one trials
    dimension. Returns ``True``/``False`` as :func:`att_svm` solves or raises
    :class:`InfeasibleError`, and ``None`` where float64 cannot decide (``att_svm`` raises
    :class:`IllConditionedError`): one verdict for one instance, a list of verdicts (one per
    trial) for a batched problem."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if len(problem.batch_shape) > 1:
        raise ValueError(f"problem must have at most one trials dimension, got X {tuple(problem.X.shape)}")
    if not problem.batch_shape:
        return _feasible(problem.X, problem.Z, problem.opt if alpha is None else alpha, problem.mask)
    trials = problem.batch_shape[0]
    alpha = problem.opt if alpha is None else as_array(alpha, "alpha")
    if alpha.ndim == 1:
        alpha = alpha.expand(trials, *alpha.shape)
    if tuple(alpha.shape) != (trials, problem.n):
        raise ValueError(f"alpha must have shape {(trials, problem.n)} (one selection per trial) "
                         f"or {(problem.n,)}, got {tuple(alpha.shape)}")
    mask = problem.mask
    return [_feasible(problem.X[b], problem.Z[b], alpha[b],
                      mask if mask is None or mask.ndim == 2 else mask[b]) for b in range(trials)]


def _feasible(X, Z, alpha, mask) -> bool | None:
    try:
        att_svm(X, Z, alpha, mask=mask)
        return True
    except InfeasibleError:
        return False
    except IllConditionedError:
        return None


def _check_options(norm, rank_tol, support_tol, solver) -> tuple[float, float]:
    if norm not in ("fro", "nuc"):
        raise ValueError(f"norm must be 'fro' or 'nuc', got {norm!r}")
    _check_solver(solver)
    if rank_tol == 1.0:
        raise ValueError("rank_tol must be below 1: at 1 no singular value counts (every rank reads 0)")
    return (check_positive(rank_tol, "rank_tol", upper=1.0),
            check_positive(support_tol, "support_tol", upper=1.0))


def p_svm(keys, alpha, support_tol: float = 1e-5) -> SVMResult:
    """Paper B's p-SVM: ``p_mm = argmin ||p||`` subject to ``p^T (k_{i,alpha_i} - k_it) >= 1`` on keys ``(n, T, d)``.

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
        p, accuracy = _solve(A, (d,), "fro", "CLARABEL")
    except InfeasibleError:
        raise InfeasibleError("p-SVM is infeasible: "
                              + _blocking_example(list(diffs), diffs, None)) from None
    return _result(p, diffs @ p, alpha, "fro", _scaled_norm(p), support_tol, accuracy=accuracy)


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
