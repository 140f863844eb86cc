"""Several selected tokens per example: the Gen-SVM direction, the finite part and the SVM-eq fit
(paper A, nonlinear heads; book page 'What is proved where' - proposed by the authors, "no rigorous theory yet").

With a nonlinear head, gradient descent may keep a *set* ``O_i`` of tokens per example. The
authors' prediction is ``W_k ~ W_fin + C_k W_dir`` with

* the direction ``W_dir`` solving **Gen-SVM**::

      min ||W||_F  s.t.  (x_it - x_itau)^T W z_i >= 1   for t in O_i, tau not in O_i,
                         (x_it - x_itau)^T W z_i  = 0   for t, tau in O_i;

* the finite part ``W_fin`` meeting ``(x_it - x_itau)^T W_fin z_i = log(s_it / s_itau)`` for
  ``t, tau in O_i``, where ``s`` are the softmax probabilities GD settles on inside each set. Many
  matrices do; this module takes the one of least Frobenius norm (our choice: the paper leaves it
  open);
* ``C_k`` fitted to an iterate by least squares, as in the authors' experiment code (``svm_eq``).

With every ``|O_i| = 1`` Gen-SVM is Att-SVM. Both problems are solved exactly: the equalities
define a subspace, and Gen-SVM is the least-distance problem of the inequalities inside it (the
same exact NNLS solve as ``att_svm``'s Frobenius problem).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .svm import _check_sizes, _numpy
from ._svm_core import IllConditionedError, InfeasibleError, _min_norm_point, _scaled_norm
from ..model.utils import as_array, as_mask, check_positive, exact_scale


@dataclass(frozen=True)
class GenSVMResult:
    """Solution of Gen-SVM for the selected sets.

    Attributes:
        W: the direction ``W_dir`` ``(d, d)``, float64.
        objective: ``||W_dir||_F``.
        margins: ``(x_{i,t0} - x_itau)^T W z_i`` ``(n, T)`` against a reference token ``t0`` of
            ``O_i`` (its first member); ``+inf`` inside ``O_i``.
        support: the active inequality constraints (margin within ``support_tol`` of 1) ``(n, T)``.
        selected: the sets as a boolean mask ``(n, T)``.
    """

    W: torch.Tensor
    objective: float
    margins: torch.Tensor
    support: torch.Tensor
    selected: torch.Tensor


KEEP = 1e-3      # a token with final probability >= KEEP is selected (the authors' threshold)
MASKED = 1e-6    # ... and one with probability <= MASKED is masked; in between is ambiguous


def selected_sets(probabilities, keep: float = KEEP, masked: float = MASKED, mask=None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The selected sets of a batch of runs and the authors' acceptance filter (paper A's
    multi-token experiment; the reproduction report, A6).

    From final softmax probabilities ``(*B, n, T)``: ``O_i = {t : s_it >= keep}`` as a boolean
    mask ``(*B, n, T)``, and per run ``(*B,)`` whether it is *clear*: no probability in
    ``(masked, keep)`` (ambiguous) and at least one at most ``masked`` (something is masked).
    The SVMs must still be solved for a run to be accepted. With a token ``mask`` (e.g. causal
    attention, ``Problem.mask``), tokens a query may not see count neither as masked by training
    nor as ambiguous.
    """
    s = as_array(probabilities, "probabilities")
    if s.ndim < 2 or not s.is_floating_point():
        raise ValueError(f"probabilities must be a float tensor (..., n, T), got "
                         f"{s.dtype} {tuple(s.shape)}")
    if s.numel() == 0:
        missing = "token" if s.shape[-1] == 0 else "example" if s.shape[-2] == 0 else "run"
        raise ValueError(f"probabilities have shape {tuple(s.shape)}: no {missing}; pass the "
                         "final softmax probabilities (..., n, T) of at least one run, example and "
                         "token, e.g. attention.probabilities(problem)")
    if not bool(torch.isfinite(s).all()) or bool((s < 0).any()) or bool((s > 1).any()):
        raise ValueError("probabilities must be finite and in [0, 1]")
    masked = check_positive(masked, "masked", upper=1.0)
    keep = check_positive(keep, "keep", upper=1.0)
    if not masked < keep:
        raise ValueError(f"need masked < keep, got masked={masked} and keep={keep}")
    visible = torch.ones_like(s, dtype=torch.bool)
    if mask is not None:
        mask = as_mask(mask, "mask")
        try:
            visible = torch.broadcast_to(mask.to(s.device), s.shape)
        except RuntimeError:
            raise ValueError(f"mask {tuple(mask.shape)} does not fit the probabilities "
                             f"{tuple(s.shape)}") from None
    sets = (s >= keep) & visible
    ambiguous = ((s > masked) & (s < keep) & visible).flatten(-2).any(-1)
    something_masked = ((s <= masked) & visible).flatten(-2).any(-1)
    return sets, ~ambiguous & something_masked


def _visible(mask, n: int, T: int) -> np.ndarray:
    """The tokens each query may see, ``(n, T)`` boolean (all without a mask)."""
    if mask is None:
        return np.ones((n, T), dtype=bool)
    return as_mask(mask, "mask", (n, T), "(n, T): True = the query may see the token").cpu().numpy()


def _sets(selected, n: int, T: int, visible: np.ndarray | None = None) -> np.ndarray:
    """The selected sets as an ``(n, T)`` boolean mask, validated (each a non-empty proper subset
    of the visible tokens)."""
    if not isinstance(selected, (torch.Tensor, np.ndarray, list, tuple)):
        raise TypeError(f"selected must be a boolean mask of shape (n, T) = {(n, T)}, got "
                        f"{type(selected).__name__}")
    mask = as_array(selected, "selected")
    if mask.dtype != torch.bool:
        raise TypeError(f"selected must be a boolean mask of shape (n, T) = {(n, T)} "
                        f"(True = token kept), got dtype {mask.dtype}")
    if tuple(mask.shape) != (n, T):
        raise ValueError(f"selected must have shape (n, T) = {(n, T)}, got {tuple(mask.shape)}")
    mask = mask.cpu().numpy()
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise ValueError(f"example {int(empty[0])} selects no token: every set O_i needs one")
    if visible is not None and (mask & ~visible).any():
        i = int(np.flatnonzero((mask & ~visible).any(axis=1))[0])
        raise ValueError(f"example {i} selects a token its query may not see (masked)")
    return mask          # an example may keep every token: it then adds equalities only


def _check_data(X, Z) -> tuple[np.ndarray, np.ndarray]:
    X, Z = _numpy(X, "X"), _numpy(Z, "Z")
    if X.ndim != 3 or Z.shape != (X.shape[0], X.shape[2]):
        raise ValueError(f"X must be (n, T, d) and Z (n, d); got {X.shape} and {Z.shape}")
    _check_sizes(X, "X")
    return X, Z


def _rows(X: np.ndarray, Z: np.ndarray, mask: np.ndarray, visible: np.ndarray | None = None
          ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Constraint features ``vec((x_{i,t0} - x_it) z_i^T)``: the equalities (``t in O_i``, ``t != t0``)
    and the inequalities (``t`` visible and not in ``O_i``), in example-then-token order, with the
    ``(i, t)`` indices of the inequalities."""
    n, T, d = X.shape
    if visible is None:
        visible = np.ones_like(mask)
    first = mask.argmax(axis=1)                                  # t0: the first member of O_i
    rows = ((X[np.arange(n), first][:, None, :, None] - X[:, :, :, None])
            * Z[:, None, None, :]).reshape(n, T, d * d)
    equal = mask.copy()
    equal[np.arange(n), first] = False
    unequal = ~mask & visible
    return rows[equal], rows[unequal], np.nonzero(unequal)


def _null_space(E: np.ndarray, dim: int) -> np.ndarray:
    """Orthonormal basis (columns) of ``{w : E w = 0}`` (relative tolerance 1e-12)."""
    if not E.size:
        return np.eye(dim)
    _, sigma, vt = np.linalg.svd(E, full_matrices=True)
    rank = int((sigma > sigma[0] * 1e-12).sum()) if sigma.size and sigma[0] > 0 else 0
    return vt[rank:].T


class NoMarginError(ValueError):
    """Gen-SVM without a margin constraint: every example keeps all the tokens it sees, or is
    relaxed, so only equalities are left and the problem has no direction (``W = 0`` meets them)."""


def gen_svm(X, Z, selected, support_tol: float = 1e-5, mask=None, relaxed=None) -> GenSVMResult:
    """Solve Gen-SVM for the sets ``selected`` (boolean ``(n, T)``, True = token in ``O_i``).
    ``mask`` (boolean ``(n, T)``, e.g. ``Problem.mask`` of causal attention): tokens a query may
    not see get no constraint (margin ``+inf``); the selected tokens must be visible.
    ``relaxed`` (boolean ``(n,)``): the **relaxed Gen-SVM** (ours, not the authors'; book chapter 6):
    the examples marked True keep their equalities but lose their margin constraints (margin
    ``+inf``), as for an input on which the loss is flat (a ReLU head switched off).

    Raises:
        NoMarginError: no margin constraint is left (every example keeps all it sees, or is relaxed).
        InfeasibleError: no W keeps every set's logits equal and 1 above every masked token; the
            message names the first example that cannot be added to the earlier ones.
        IllConditionedError: float64 cannot decide: the sets are infeasible only through a margin
            constraint whose part outside the equalities is 1e-13 to 1e-10 of its length (a
            feasible problem there would need a norm near float64's limit), or the solution found
            misses its constraints by more than 1e-6.
    """
    support_tol = check_positive(support_tol, "support_tol", upper=1.0)
    X, Z = _check_data(X, Z)
    n, T, d = X.shape
    visible = _visible(mask, n, T)
    sets = _sets(selected, n, T, visible if mask is not None else None)
    if relaxed is not None:           # a relaxed example "sees" only its set: equalities, no margin
        free = as_mask(relaxed, "relaxed", (n,), "(n,): True = the example keeps no margin").cpu().numpy()
        visible = np.where(free[:, None], sets, visible)
    return _gen_svm(X, Z, sets, visible, support_tol)


def _gen_svm(X: np.ndarray, Z: np.ndarray, sets: np.ndarray, visible: np.ndarray,
             support_tol: float = 1e-5, rows: tuple | None = None) -> GenSVMResult:
    """:func:`gen_svm` on checked data; ``rows``: the scaled constraint rows if already built."""
    n, T, d = X.shape
    sx, sz = exact_scale(X), exact_scale(Z)          # exact powers of two: same digits
    E, A, where = rows if rows is not None else _rows(X * sx, Z * sz, sets, visible)
    if not A.size:
        raise NoMarginError("no margin constraint: every example keeps all the tokens it sees (or is "
                            "relaxed), so Gen-SVM has no direction (only equalities)")
    coefficients, basis, undecided = _solve_reduced(E, A, d)
    if coefficients is None and undecided:
        raise IllConditionedError(
            "Gen-SVM: float64 cannot decide feasibility: a margin constraint is nearly implied by the "
            "equalities (its part outside them is between 1e-13 and 1e-10 of its length), so the sets "
            "are infeasible or feasible only with a norm near float64's limit; perturb or rescale the "
            "tokens, or treat the sets as degenerate")
    if coefficients is None:
        raise InfeasibleError("Gen-SVM is infeasible: " + _blocking(X, Z, sets, visible))
    W = (basis @ coefficients).reshape(d, d)
    values = A @ W.ravel()
    if values.min() < 1 - 1e-6 or (E.size and np.abs(E @ W.ravel()).max() > 1e-6 * max(
            1.0, np.abs(values).max())):
        raise IllConditionedError("Gen-SVM: the solution does not meet its constraints to 1e-6 "
                                  "(the sets are too close to infeasible for float64)")
    margins = np.full((n, T), np.inf)
    margins[where] = values
    W = _unscale(W, sx * sz, "Gen-SVM direction")
    return GenSVMResult(W=torch.from_numpy(W), objective=_scaled_norm(W),
                        margins=torch.from_numpy(margins),
                        support=torch.from_numpy(margins <= 1 + support_tol),
                        selected=torch.from_numpy(sets))


def _solve_reduced(E: np.ndarray, A: np.ndarray,
                   d: int) -> tuple[np.ndarray | None, np.ndarray, bool]:
    """The least-norm ``c`` with ``A N c >= 1`` for ``N`` an orthonormal basis of ``{E w = 0}``
    (None if infeasible), the basis, and whether the verdict is undecided in float64. A projected
    row below 1e-10 of its original length is taken as rounding noise of a row the equalities
    annihilate and set to 0 (so ``0 >= 1`` reads as infeasible); one between 1e-13 and 1e-10 may
    be a real, tiny part (a feasible problem with a huge norm): such rows make an infeasible
    verdict undecided."""
    basis = _null_space(E, d * d)
    if not basis.shape[1]:
        return None, basis, False
    reduced = A @ basis
    relative = np.linalg.norm(reduced, axis=1) / np.linalg.norm(A, axis=1)
    grey = (relative <= 1e-10) & (relative > 1e-13)
    reduced[relative <= 1e-10] = 0.0
    coefficients = _min_norm_point(reduced) if np.abs(reduced).max() > 0 else None
    if coefficients is None and grey.any():       # infeasible only through the grey rows?
        rest = reduced[~grey]
        decided = rest.size and not (np.abs(rest).max() > 0 and _min_norm_point(rest) is not None)
        return None, basis, not decided
    return coefficients, basis, False


def _feasible_sets(X: np.ndarray, Z: np.ndarray, mask: np.ndarray, visible: np.ndarray) -> bool:
    E, A, _ = _rows(X, Z, mask, visible)
    if not A.size:
        return True
    coefficients, _, undecided = _solve_reduced(E, A, X.shape[2])
    return coefficients is not None or undecided      # undecided: not the one to blame


def _blocking(X: np.ndarray, Z: np.ndarray, mask: np.ndarray, visible: np.ndarray) -> str:
    """The first example that is infeasible alone, or that cannot join the earlier ones."""
    for i in range(X.shape[0]):
        if not _feasible_sets(X[i:i + 1], Z[i:i + 1], mask[i:i + 1], visible[i:i + 1]):
            return (f"example {i}: no W gives its selected tokens equal logits 1 above all its "
                    "other tokens (a masked token is not separable from the selected ones, e.g. "
                    "it repeats one or lies between them)")
        if not _feasible_sets(X[:i + 1], Z[:i + 1], mask[:i + 1], visible[:i + 1]):
            return (f"example {i} conflicts with examples 0..{i - 1} (their queries are linearly "
                    "dependent and ask for incompatible directions)")
    return "the constraints cannot all be satisfied"


def finite_part(X, Z, selected, probabilities, tol: float = 1e-8, mask=None) -> torch.Tensor:
    """The least-norm ``W_fin`` with ``(x_it - x_itau)^T W_fin z_i = log(s_it / s_itau)`` for
    ``t, tau in O_i`` (``probabilities`` ``(n, T)``, e.g. a GD run's final softmax; only the
    ratios inside each set matter). Raises ``ValueError`` if a probability inside a set is not
    positive, and :class:`InfeasibleError` if no matrix meets the equalities (relative residual
    above ``tol``). ``mask``: the tokens each query may see, as in :func:`gen_svm`."""
    tol = check_positive(tol, "tol", upper=1.0)
    X, Z = _check_data(X, Z)
    n, T, d = X.shape
    mask = _sets(selected, n, T, None if mask is None else _visible(mask, n, T))
    return _finite_part(X, Z, mask, _set_probabilities(probabilities, mask), tol)


def _set_probabilities(probabilities, sets: np.ndarray) -> np.ndarray:
    """The probabilities as an ``(n, T)`` array, positive inside every set (log-ratios follow)."""
    s = _numpy(probabilities, "probabilities")
    if s.shape != sets.shape:
        raise ValueError(f"probabilities must have shape (n, T) = {sets.shape}, got {s.shape}")
    if not (s[sets] > 0).all():
        raise ValueError("every selected token needs a positive probability (log-ratios of the "
                         "finite part); a token with probability 0 is not selected")
    return s


def _finite_part(X: np.ndarray, Z: np.ndarray, mask: np.ndarray, s: np.ndarray, tol: float = 1e-8,
                 E: np.ndarray | None = None) -> torch.Tensor:
    """:func:`finite_part` on checked data; ``E``: the scaled equality rows if already built."""
    n, T, d = X.shape
    sx, sz = exact_scale(X), exact_scale(Z)          # exact powers of two: same digits
    if E is None:
        E, _, _ = _rows(X * sx, Z * sz, mask)
    if not E.size:                    # every set has one token: no equality, W_fin = 0
        return torch.zeros(d, d, dtype=torch.float64)
    # rows are x_{t0} - x_t, so the target is log s_t0 - log s_t (a logit difference)
    first = mask.argmax(axis=1)
    others = mask.copy()
    others[np.arange(n), first] = False
    logs = np.log(np.where(mask, s, 1.0))
    targets = (logs[np.arange(n), first][:, None] - logs)[others]
    solution, *_ = np.linalg.lstsq(E, targets, rcond=None)
    residual = np.abs(E @ solution - targets).max()
    if residual > tol * max(1.0, np.abs(targets).max()):
        raise InfeasibleError(f"no W has these logit ratios inside the sets (residual "
                              f"{residual:.2e}): the selected tokens' equalities are inconsistent")
    return torch.from_numpy(_unscale(solution.reshape(d, d), sx * sz, "finite part"))


def _direction_and_finite_part(X: np.ndarray, Z: np.ndarray, sets: np.ndarray, s: np.ndarray
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """``gen_svm(X, Z, sets).W`` and ``finite_part(X, Z, sets, s)``, the same digits, from one set
    of constraint rows (the two parts of the authors' SVM-eq prediction ``W_fin + C W_dir`` of one
    run). The data come checked (:func:`_check_data`, non-empty ``sets``, ``s > 0`` inside them):
    :func:`attnsvm.studies.a6_study` checks a whole batch of runs once."""
    visible = np.ones_like(sets)
    rows = _rows(X * exact_scale(X), Z * exact_scale(Z), sets, visible)
    return _gen_svm(X, Z, sets, visible, rows=rows).W, _finite_part(X, Z, sets, s, E=rows[0])


def _unscale(W: np.ndarray, factor: float, what: str) -> np.ndarray:
    """``W * factor``: the solution for the data before :func:`exact_scale`; refuses overflow."""
    out = W * factor
    if not np.isfinite(out).all():
        raise IllConditionedError(f"the {what} overflows float64: the tokens and queries are so "
                                  "small (~1e-300) that W must be ~1e300 or more; rescale X or Z")
    return out


