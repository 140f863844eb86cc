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


def constraint_features(X, Z, alpha) -> torch.Tensor:
    """``F_it = (x_{i,alpha_i} - x_it) z_i^T`` for every example and token, shape ``(n, T, d, d)``,
    float64; ``F_{i,alpha_i} = 0``. The margin of ``W`` on token ``t`` is ``<W, F_it>``.

    Args: X tokens ``(n, T, d)``, Z queries ``(n, d)``, alpha the selected token per example ``(n,)``.
    """
    X, Z = _numpy(X, "X"), _numpy(Z, "Z")
    if X.ndim != 3 or Z.shape != (X.shape[0], X.shape[2]):
        raise ValueError(f"X must be (n, T, d) and Z (n, d); got {X.shape} and {Z.shape}")
    _check_sizes(X, "X")
    n = X.shape[0]
    alpha = _selection(alpha, n, X.shape[1])
    diffs = X[np.arange(n), alpha][:, None, :] - X                         # (n, T, d)
    return torch.from_numpy(np.einsum("ntd,ne->ntde", diffs, Z))


def kkt_multipliers(X, Z, alpha, result: SVMResult) -> tuple[torch.Tensor, float]:
    """The multipliers ``lambda >= 0`` with ``W_mm = sum lambda_it F_it`` over the support tokens of
    ``result`` (the Att-SVM solution for ``alpha``), by nonnegative least squares.

    Returns ``lambda`` of shape ``(n, T)`` (zero off the support) and the relative residual
    ``||W_mm - sum lambda F||_F / ||W_mm||_F``: near 0 when the KKT form holds, as it must for a
    Frobenius solution; a large residual says ``result`` is not this problem's solution.
    """
    if not isinstance(result, SVMResult) or result.norm != "fro":
        raise ValueError("result must be the Frobenius Att-SVM solution (att_svm(X, Z, alpha)) whose "
                         "KKT multipliers are wanted")
    features = constraint_features(X, Z, alpha)
    if tuple(result.support.shape) != tuple(features.shape[:2]):
        raise ValueError(f"result has support of shape {tuple(result.support.shape)}, but X and Z "
                         f"have (n, T) = {tuple(features.shape[:2])}")
    support = result.support.cpu()
    W = result.W.detach().cpu().to(torch.float64)
    lam = torch.zeros(support.shape, dtype=torch.float64)
    if support.any():
        columns = features[support].flatten(1).T.numpy()                   # (d*d, #support)
        values, residual = scipy.optimize.nnls(columns, W.flatten().numpy())
        lam[support] = torch.from_numpy(values)
    else:
        residual = float(W.norm())
    return lam, float(residual) / float(W.norm())
