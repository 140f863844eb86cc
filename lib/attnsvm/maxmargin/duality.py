"""The features and multipliers of Att-SVM (paper A section 3; the book's KKT proposition).

Att-SVM(alpha) is a hard-margin SVM on outer-product features: the margin of token ``t`` of example
``i`` is ``<W, F_it>`` with ``F_it = (x_{i,alpha_i} - x_it) z_i^T``. By the KKT conditions its
solution is a nonnegative combination of the features of the active constraints (the support
tokens), ``W_mm = sum_it lambda_it F_it``.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
import torch

from .svm import SVMResult, _check_sizes, _numpy, _selection
from ..model.utils import exact_scale


def _scaled_features(X, Z, alpha) -> tuple[np.ndarray, float]:
    """The features of the data times ``factor`` (an exact power of two, 1 for ordinary data),
    computed without overflow or underflow, and that ``factor``."""
    X, Z = _numpy(X, "X"), _numpy(Z, "Z")
    if X.ndim != 3 or Z.shape != (X.shape[0], X.shape[2]):
        raise ValueError(f"X must be (n, T, d) and Z (n, d); got {X.shape} and {Z.shape}")
    _check_sizes(X, "X")
    n = X.shape[0]
    alpha = _selection(alpha, n, X.shape[1])
    sx, sz = exact_scale(X), exact_scale(Z)
    X, Z = X * sx, Z * sz
    diffs = X[np.arange(n), alpha][:, None, :] - X                         # (n, T, d)
    return np.einsum("ntd,ne->ntde", diffs, Z), sx * sz


def _unscaled(values: np.ndarray, factor: float, power: int, what: str) -> np.ndarray:
    """``values / factor**power`` (exact), refusing entries that leave float64's range."""
    out = values.copy()
    for _ in range(abs(power)):
        out = out / factor if power > 0 else out * factor
    lost = (values != 0) & ((out == 0) | ~np.isfinite(out))
    if lost.any():
        raise ValueError(f"the {what} of these data leave float64's range (the data are scaled by "
                         f"~{1 / factor:.0e}): rescale X and Z to "
                         "entries near 1 (the problem is scale-invariant) and scale the answer back")
    return out


def constraint_features(X, Z, alpha) -> torch.Tensor:
    """``F_it = (x_{i,alpha_i} - x_it) z_i^T`` for every example and token, shape ``(n, T, d, d)``,
    float64; ``F_{i,alpha_i} = 0``. The margin of ``W`` on token ``t`` is ``<W, F_it>``.

    Args: X tokens ``(n, T, d)``, Z queries ``(n, d)``, alpha the selected token per example ``(n,)``.
    Raises ``ValueError`` when a feature overflows or underflows float64 (data of ~1e200 or
    ~1e-200).
    """
    features, factor = _scaled_features(X, Z, alpha)
    return torch.from_numpy(_unscaled(features, factor, 1, "constraint features"))


def kkt_multipliers(X, Z, alpha, result: SVMResult) -> tuple[torch.Tensor, float]:
    """The multipliers ``lambda >= 0`` with ``W_mm = sum lambda_it F_it`` over the support tokens of
    ``result`` (the Att-SVM solution for ``alpha``), by nonnegative least squares.

    Returns ``lambda`` of shape ``(n, T)`` (zero off the support) and the relative residual
    ``||W_mm - sum lambda F||_F / ||W_mm||_F``: near 0 when the KKT form holds, as it must for a
    Frobenius solution; a large residual says ``result`` is not this problem's solution. The solve
    runs on the data rescaled by exact powers of two (``lambda`` scales as ``1 / scale^2``); a
    ``lambda`` outside float64's range raises ``ValueError``.
    """
    if not isinstance(result, SVMResult):
        raise TypeError(f"result must be the SVMResult of att_svm(X, Z, alpha), got "
                        f"{type(result).__name__}")
    if result.norm != "fro" or result.W.ndim != 2:
        raise ValueError("result must be the Frobenius Att-SVM solution (att_svm(X, Z, alpha)) whose "
                         "KKT multipliers are wanted")
    features, factor = _scaled_features(X, Z, alpha)
    if tuple(result.support.shape) != tuple(features.shape[:2]) or \
            tuple(result.W.shape) != tuple(features.shape[2:]):
        raise ValueError(f"result has W {tuple(result.W.shape)} and support of shape "
                         f"{tuple(result.support.shape)}, but X and Z have (n, T) = "
                         f"{tuple(features.shape[:2])} and d = {features.shape[2]}")
    support = result.support.cpu().numpy()
    W = _unscaled(result.W.detach().cpu().to(torch.float64).numpy(), factor, 1, "solution W")
    top = float(np.abs(W).max())
    if not top > 0:
        raise ValueError("result.W is zero: it is not an Att-SVM solution")
    lam = np.zeros(support.shape)
    if support.any():
        columns = features[support].reshape(int(support.sum()), -1).T       # (d*d, #support)
        values, residual = scipy.optimize.nnls(columns, W.ravel() / top)
        lam[support] = _unscaled(values * top, factor, -2, "KKT multipliers")
    else:
        residual = float(np.linalg.norm(W / top))
    return torch.from_numpy(lam), float(residual) / float(np.linalg.norm(W / top))
