"""The SVMs of joint (v, p) training (paper B, prompt attention with a trained head; book page 'What is proved where', "Paper B, joint (v, p)").

* **v-SVM**: ``v(alpha) = argmin ||v|| s.t. Y_i v^T x_{i,alpha_i} >= 1`` - a hard-margin linear
  SVM without bias on the selected tokens.
* **relaxed p-SVM**: ``argmin ||p|| s.t. p^T (k_{i,alpha_i} - k_it) >= 1`` for the examples ``i``
  in ``S`` (those whose selected token is a support vector of the v-SVM) and ``>= 0`` for the
  others. With ``S`` = every example it is the p-SVM.

Both are least-distance problems ``min ||x|| s.t. G x >= h`` and are solved exactly by NNLS
(Lawson and Hanson, *Solving Least Squares Problems*, ch. 23), like ``att_svm``'s Frobenius problem.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from .svm import SVMResult, _check_sizes, _numpy, _result, _selection, token_differences
from ._svm_core import InfeasibleError, _min_norm_point, _scaled_norm
from ..model.utils import as_array, check_positive


def least_distance(G: np.ndarray, h: np.ndarray) -> np.ndarray | None:
    """The point of least norm in ``{x : G x >= h}`` (``h >= 0``), or ``None`` if that set is empty
    (to float64 precision); raises :class:`IllConditionedError` where float64 cannot decide. The
    exact NNLS least-distance solve of ``att_svm`` with a general right-hand side."""
    if not (h > 0).any():                        # x = 0 meets every constraint
        return np.zeros(G.shape[1])
    return _min_norm_point(G, h)


def v_svm(X, Y, alpha, support_tol: float = 1e-5) -> SVMResult:
    """The v-SVM on the selected tokens ``x_{i,alpha_i}`` of ``X (n, T, d)`` with labels ``Y (n,)``.

    ``margins`` ``(n, 1)`` are ``Y_i v^T x_{i,alpha_i}``; ``support`` marks the examples whose
    margin is 1 (within ``support_tol``): the set ``S`` of the relaxed p-SVM. Raises
    :class:`InfeasibleError` when no v classifies every selected token (the message names an
    example of each label that collide)."""
    support_tol = check_positive(support_tol, "support_tol", upper=1.0)
    X, Y = _numpy(X, "X"), _numpy(Y, "Y")
    if X.ndim != 3 or Y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, T, d) and Y (n,); got {X.shape} and {Y.shape}")
    if not np.isin(Y, (-1.0, 1.0)).all():
        raise ValueError("labels Y must be -1 or +1")
    if X.shape[0] < 1 or X.shape[1] < 1 or X.shape[2] < 1:
        raise ValueError(f"X has shape {X.shape}: need n >= 1 examples, T >= 1 tokens and d >= 1")
    n, T, d = X.shape
    alpha = _selection(alpha, n, T)
    features = Y[:, None] * X[np.arange(n), alpha]
    v = least_distance(features, np.ones(n))
    if v is None:
        raise InfeasibleError("v-SVM is infeasible: the selected tokens of the two labels cannot "
                              "be separated by a hyperplane through the origin (e.g. a token and "
                              "its negative, or the same token, with both labels)")
    margins = features @ v
    return SVMResult(W=torch.from_numpy(v), norm="fro", objective=_scaled_norm(v),
                     margins=torch.from_numpy(margins[:, None]),
                     support=torch.from_numpy(margins[:, None] <= 1 + support_tol), rank=1)


def relaxed_p_svm(keys, alpha, supported, support_tol: float = 1e-5) -> SVMResult:
    """The relaxed p-SVM: margin 1 for the examples with ``supported[i]`` (the v-SVM's support
    examples), margin 0 for the others, on keys ``(n, T, d)``. ``support`` marks the active
    constraints (margin 1, or 0 for the unsupported examples, within ``support_tol``). Raises
    :class:`InfeasibleError`."""
    support_tol = check_positive(support_tol, "support_tol", upper=1.0)
    K = _numpy(keys, "keys")
    if K.ndim != 3:
        raise ValueError(f"keys must have shape (n, T, d), got {K.shape}")
    _check_sizes(K, "keys")
    n, T, d = K.shape
    alpha = _selection(alpha, n, T)
    S = as_array(supported, "supported").cpu()
    if S.dtype != torch.bool or tuple(S.shape) != (n,):
        raise ValueError(f"supported must be a boolean mask of shape (n,) = ({n},) (True = the "
                         f"example's selected token is a v-SVM support vector), got {S.dtype} "
                         f"{tuple(S.shape)}")
    diffs = token_differences(K, alpha)                          # (n, T - 1, d)
    h = np.repeat(S.numpy().astype(float), T - 1)
    p = least_distance(diffs.reshape(-1, d), h)
    if p is None:
        raise InfeasibleError("relaxed p-SVM is infeasible: no p gives every supported example's "
                              "selected key a margin of 1 while keeping the others' at least 0")
    result = _result(p, diffs @ p, alpha, "fro", _scaled_norm(p), support_tol)
    active = torch.where(S[:, None], result.margins <= 1 + support_tol,
                         result.margins.abs() <= support_tol)
    return replace(result, support=active)
