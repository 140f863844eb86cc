"""One Att-SVM instance, checked and brought to the coordinates its data span (used by ``svm``).

The checks every max-margin solver of the library shares (shapes, the selection ``alpha``, the token
mask), the token differences ``x_{i,alpha_i} - x_it`` that make the constraints, the explanation of
an infeasible instance (which example blocks it), and :class:`_Instance`: Att-SVM reduced to the
span of the token differences and of the queries, where each constraint feature is rank one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from ._svm_core import InfeasibleError, _basis, _feasible
from ..model.utils import as_array, as_mask, as_tensor, exact_scale


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
            earlier = "example 0" if i == 1 else f"examples 0..{i - 1}"
            if Z is None:
                return (f"example {i} conflicts with {earlier}: no single p exposes "
                        "all their selected keys at once")
            return (f"example {i} conflicts with {earlier} (the queries are linearly "
                    "dependent and ask for incompatible directions)")
    return "the solver reported infeasibility"


@dataclass(frozen=True)
class _Instance:
    """One Att-SVM instance in the coordinates its data span: both norms are unitarily invariant,
    so projecting W onto span(token differences) x span(queries) keeps every constraint and never
    increases the norm, and only the small core ``M`` (``W = left M right^T``) is solved for.
    Constraint ``k`` (example ``i``, token ``t``) has the rank-one feature ``U[k] V[k]^T`` with
    ``U[k] = left^T (x_{i,alpha_i} - x_it)`` and ``V[k] = right^T z_i``."""

    diffs: np.ndarray          # (n, T-1, d), of the data as solved (rescaled if extreme)
    Z: np.ndarray
    keep: np.ndarray           # (n, T-1): which differences are constraints
    alpha: np.ndarray
    left: np.ndarray
    right: np.ndarray
    rescale: float             # W of the given data = W of the solved data * rescale

    @property
    def shape(self) -> tuple[int, int]:
        return self.left.shape[1], self.right.shape[1]

    @cached_property
    def factors(self) -> tuple[np.ndarray, np.ndarray]:
        U = (self.diffs @ self.left)[self.keep]
        V = np.broadcast_to((self.Z @ self.right)[:, None, :],
                            self.keep.shape + (self.right.shape[1],))[self.keep]
        return U, V

    @cached_property
    def features(self) -> np.ndarray:
        U, V = self.factors
        return np.einsum("ku,kv->kuv", U, V).reshape(U.shape[0], -1)

    def infeasible(self) -> InfeasibleError:
        """The error naming the example that blocks this (infeasible) instance."""
        n, T, d = self.diffs.shape[0], self.diffs.shape[1] + 1, self.diffs.shape[2]
        features = np.einsum("ntd,ne->ntde", self.diffs, self.Z).reshape(n, T - 1, d * d)
        return InfeasibleError("Att-SVM is infeasible: " + _blocking_example(
            [f[k] for f, k in zip(features, self.keep)],
            [g[k] for g, k in zip(self.diffs, self.keep)], self.Z))


def _reduce(X, Z, alpha, mask) -> _Instance:
    """Check one instance's data and bring it to the coordinates it spans (:class:`_Instance`)."""
    X, Z = _numpy(X, "X"), _numpy(Z, "Z")
    if X.ndim != 3 or Z.shape != (X.shape[0], X.shape[2]):
        raise ValueError(f"X must be (n, T, d) and Z (n, d); got {X.shape} and {Z.shape} "
                         "(solve batched problems with att_svms)")
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
    return _Instance(diffs=diffs, Z=Z, keep=keep, alpha=alpha, left=_basis(diffs.reshape(-1, d)),
                     right=_basis(Z), rescale=sx * sz)


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
