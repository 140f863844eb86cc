"""Next-token prediction with a linear decoder (Thrampoulidis, "Implicit optimization bias of
next-token prediction in linear models", NeurIPS 2024; book page ch08b).

The data are ``m`` *distinct* contexts with fixed embeddings ``h_j`` (rows of ``H``, ``(m, d)``),
each followed by the tokens of a vocabulary of size ``V`` with empirical probabilities ``P[j]``
(rows of ``P``, ``(m, V)``; the support ``S_j = {z : P[j, z] > 0}`` is usually small), and
context frequencies ``pi`` (``(m,)``). A decoder ``W`` ``(V, d)`` gives logits ``W h_j``; the loss is
the cross-entropy ``CE(W) = -sum_j pi_j sum_z P[j, z] log softmax(W h_j)_z``, bounded below by the
data entropy ``sum_j pi_j H(P[j])``. The paper's two objects:

- the data subspace ``F = span{(e_z - e_z') h_j^T : z, z' in S_j}`` and the point
  ``W_star`` of ``F`` whose in-support logit differences are the log-odds,
  ``(e_z - e_z')^T W_star h_j = log(P[j, z] / P[j, z'])`` (:func:`ntp_finite_part`; it exists
  when the data are "NTP_H-compatible");
- the max-NTP-margin direction ``W_mm = argmin ||W||_F`` over ``W`` orthogonal to ``F`` with
  ``(e_z - e_v)^T W h_j >= 1`` for ``z in S_j``, ``v not in S_j`` (:func:`ntp_svm`; it exists when
  the data are "NTP-separable").

Under both conditions the paper proves that gradient descent with a small enough step drives the
loss to the entropy bound, its projection on ``F`` to ``W_star`` and its direction to ``W_mm``.
:func:`ntp_gradient_descent` runs it; :func:`ntp_gradient_descent_batch` runs it on many
instances of one shape at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import torch

from ._svm_core import InfeasibleError, _basis, _min_norm_point
from ..model.utils import DEFAULT_DTYPE, as_tensor, check_count, check_flag, check_log_steps, check_positive

SUPPORT_TOL = 0.0          # a token is in the support when its probability is > 0


@dataclass(frozen=True)
class NTPData:
    """Checked next-token data: embeddings ``H (m, d)``, probabilities ``P (m, V)`` (rows sum to 1),
    context weights ``pi (m,)`` (sum to 1), all float64."""

    H: torch.Tensor
    P: torch.Tensor
    pi: torch.Tensor

    @property
    def support(self) -> torch.Tensor:
        """Boolean ``(m, V)``: the tokens that follow each context."""
        return self.P > SUPPORT_TOL

    @property
    def entropy(self) -> float:
        """The lower bound of the loss: ``sum_j pi_j H(P[j])`` (natural logarithm)."""
        logs = torch.where(self.support, self.P.clamp_min(1e-300).log(), torch.zeros_like(self.P))
        return float(-(self.pi * (self.P * logs).sum(-1)).sum())


def ntp_data(H, P, pi=None) -> NTPData:
    """Check and package next-token data (see the module docstring). Raises ``ValueError`` for
    wrong shapes, NaN/inf, negative probabilities, rows that do not sum to 1, repeated contexts
    (the paper's contexts are distinct), or non-positive weights."""
    H = as_tensor(H, "H", dtype=DEFAULT_DTYPE)
    P = as_tensor(P, "P", dtype=DEFAULT_DTYPE)
    if H.ndim != 2 or P.ndim != 2 or P.shape[0] != H.shape[0]:
        raise ValueError(f"H must be (m, d) and P (m, V) with the same m; got {tuple(H.shape)} and "
                         f"{tuple(P.shape)}")
    m, V = P.shape
    check_count(m, "the number of contexts m", 1)
    check_count(V, "the vocabulary size V", 2)
    check_count(H.shape[1], "the embedding dimension d", 1)
    if bool((P < 0).any()) or not torch.allclose(P.sum(-1), torch.ones(m, dtype=P.dtype), atol=1e-12):
        raise ValueError("each row of P must be a probability vector (entries >= 0, sum 1)")
    if torch.unique(H, dim=0).shape[0] < m:                # exact repeats (cdist underflows at 1e-300)
        raise ValueError("two contexts have the same embedding: merge them (add their weights and "
                         "mix their next-token distributions); the contexts must be distinct")
    if pi is None:
        pi = torch.full((m,), 1.0 / m, dtype=H.dtype)
    pi = as_tensor(pi, "pi", dtype=DEFAULT_DTYPE)
    if pi.shape != (m,) or bool((pi <= 0).any()) or abs(float(pi.sum()) - 1) > 1e-12:
        raise ValueError(f"pi must hold m = {m} positive weights summing to 1, got {pi.tolist()}")
    return NTPData(H, P, pi)


def _data(data) -> NTPData:
    if not isinstance(data, NTPData):
        raise TypeError(f"data must be the NTPData returned by ntp_data, got {type(data).__name__}")
    return data


def _decoder(W, data: NTPData, name: str = "W", batched: bool = False) -> torch.Tensor:
    """A finite float64 decoder of shape ``(V, d)`` (``(..., V, d)`` when ``batched``)."""
    W = as_tensor(W, name, dtype=data.H.dtype)
    V, d = data.P.shape[1], data.H.shape[1]
    if (tuple(W.shape[-2:]) if batched and W.ndim >= 2 else tuple(W.shape)) != (V, d):
        raise ValueError(f"{name} must be ({'..., ' if batched else ''}V, d) = {(V, d)}, got "
                         f"{tuple(W.shape)}")
    return W


def ntp_loss(W, data: NTPData) -> torch.Tensor:
    """The cross-entropy of decoder ``W (V, d)`` (stable log-softmax), a scalar tensor."""
    data = _data(data)
    W = _decoder(W, data)
    logp = torch.log_softmax(data.H @ W.T, dim=-1)                       # (m, V)
    return -(data.pi * (data.P * torch.where(data.support, logp, torch.zeros_like(logp))).sum(-1)).sum()


def _pair_rows(data: NTPData, pairs: str) -> np.ndarray:
    """Rows ``vec((e_a - e_b) h_j^T)`` over the pairs of each context: ``"support"`` (``a`` in
    ``S_j`` against the first token of ``S_j``) or ``"margin"`` (``a`` in ``S_j``, ``b`` not)."""
    H, S = data.H.numpy(), data.support.numpy()
    V, d = S.shape[1], H.shape[1]
    rows = []
    for j in range(H.shape[0]):
        inside, outside = np.flatnonzero(S[j]), np.flatnonzero(~S[j])
        pairs_j = ([(a, inside[0]) for a in inside[1:]] if pairs == "support"
                   else [(a, b) for a in inside for b in outside])
        for a, b in pairs_j:
            row = np.zeros((V, d))
            row[a] += H[j]
            row[b] -= H[j]
            rows.append(row.ravel())
    return np.array(rows).reshape(-1, V * d)


def _data_subspace(data: NTPData, complement: bool = False) -> np.ndarray:
    """An orthonormal basis (columns) of ``F`` (``svm_core._basis``, the span rule of every SVM of the
    library: singular values above 1e-12 of the largest), or of its orthogonal complement (the same rule)."""
    rows = _pair_rows(data, "support")
    dim = data.P.shape[1] * data.H.shape[1]
    if rows.size == 0:                       # every context has a single next token: F = {0}
        return np.eye(dim) if complement else np.zeros((dim, 0))
    return scipy.linalg.null_space(rows, rcond=1e-12) if complement else _basis(rows)


def ntp_finite_part(data: NTPData) -> torch.Tensor:
    """``W_star (V, d)``: the point of the data subspace ``F`` whose in-support logit differences
    equal the log-odds (the paper's NTP_H-compatibility). Raises ``ValueError`` when no such point
    exists (the log-odds are not reachable by a linear decoder on these embeddings)."""
    data = _data(data)
    rows = _pair_rows(data, "support")
    V, d = data.P.shape[1], data.H.shape[1]
    if rows.size == 0:                       # every context has a single next token
        return torch.zeros(V, d, dtype=data.H.dtype)
    P, S = data.P.numpy(), data.support.numpy()
    targets = []
    for j in range(P.shape[0]):
        inside = np.flatnonzero(S[j])
        targets += [np.log(P[j, a] / P[j, inside[0]]) for a in inside[1:]]
    targets = np.array(targets)
    w, *_ = np.linalg.lstsq(rows, targets, rcond=None)                    # least norm: in F
    residual = float(np.abs(rows @ w - targets).max())
    if residual > 1e-9 * max(1.0, float(np.abs(targets).max())):
        raise ValueError(f"the data are not NTP_H-compatible: no decoder matches the in-support "
                         f"log-odds (largest mismatch {residual:.2e}); more embedding dimensions or "
                         "fewer in-support tokens are needed")
    return torch.from_numpy(w.reshape(V, d))


def ntp_svm(data: NTPData, orthogonal: bool = True) -> torch.Tensor:
    """``W_mm (V, d)``: the max-NTP-margin decoder (least Frobenius norm, orthogonal to ``F``, margin
    1 between every in-support and every out-of-support token of every context). Solved exactly in a
    basis of ``F``'s complement (least-distance NNLS). Raises :class:`InfeasibleError` when the data
    are not NTP-separable, ``ValueError`` when no context has an out-of-support token.

    ``orthogonal=False`` drops the condition ``W`` orthogonal to ``F`` (equal logits inside each
    support): the least-norm decoder with the same margins, a competitor of ``W_mm`` that the paper's
    theorem rules out as the limit direction (ch08b compares both)."""
    data = _data(data)
    orthogonal = check_flag(orthogonal, "orthogonal")
    margin_rows = _pair_rows(data, "margin")
    V, d = data.P.shape[1], data.H.shape[1]
    if margin_rows.size == 0:
        raise ValueError("every context is followed by every token: there is no margin to maximize")
    if orthogonal:
        complement = _data_subspace(data, complement=True)
    else:
        complement = np.eye(V * d)
    reduced = margin_rows @ complement
    coefficients = _min_norm_point(reduced) if complement.shape[1] else None
    if coefficients is None:
        raise InfeasibleError("the data are not NTP-separable: no decoder"
                              + (" orthogonal to the data subspace" if orthogonal else "")
                              + " puts every in-support token above every other token")
    return torch.from_numpy((complement @ coefficients).reshape(V, d))


def ntp_project(W, data: NTPData) -> tuple[torch.Tensor, torch.Tensor]:
    """``(P_F W, W - P_F W)``: the parts of ``W (..., V, d)`` (one decoder, or a stack such as
    :attr:`NTPHistory.iterates`) in the data subspace and orthogonal to it."""
    data = _data(data)
    W = _decoder(W, data, batched=True)
    basis = torch.from_numpy(_data_subspace(data))
    flat = W.flatten(-2)
    inside = ((flat @ basis) @ basis.T).reshape(W.shape)
    return inside, W - inside


@dataclass(frozen=True)
class NTPHistory:
    """Gradient descent on the NTP loss: logged ``steps``, ``loss``, and ``iterates`` ``(k, V, d)``."""

    steps: torch.Tensor
    loss: torch.Tensor
    iterates: torch.Tensor


def ntp_gradient_descent(data: NTPData, steps: int, lr: float, W0=None,
                         log_steps=None) -> NTPHistory:
    """Plain gradient descent ``W <- W - lr grad CE(W)`` from ``W0`` (zeros by default), with the
    closed-form gradient ``sum_j pi_j (softmax(W h_j) - P[j]) h_j^T``. ``log_steps``: the steps to
    record (default: 0 and about 60 log-spaced ones up to ``steps``), integers in ``[0, steps]``.
    Raises ``ValueError`` when the iterates or the loss overflow (the step ``lr`` is far too large).
    """
    data = _data(data)
    steps = check_count(steps, "steps", 1)
    lr = check_positive(lr, "lr")
    V, d = data.P.shape[1], data.H.shape[1]
    W = torch.zeros(V, d, dtype=data.H.dtype) if W0 is None else _decoder(W0, data, "W0").clone()
    wanted = set(check_log_steps(log_steps, steps).tolist())
    weighted_H = data.pi[:, None] * data.H                              # (m, d)
    logged_steps, losses, iterates = [], [], []
    for k in range(steps + 1):
        if k in wanted:
            logged_steps.append(k)
            losses.append(float(ntp_loss(W, data)))
            iterates.append(W.clone())
            if not np.isfinite(losses[-1]):
                raise ValueError(f"the loss overflows at step {k} (||W|| = {float(W.norm()):.1e}): "
                                 f"the step lr = {lr:g} is far too large")
        if k == steps:
            break
        residual = torch.softmax(data.H @ W.T, dim=-1) - data.P           # (m, V)
        W = W - lr * residual.T @ weighted_H
        if not bool(torch.isfinite(W).all()):
            raise ValueError(f"the iterates overflow at step {k + 1}: the step lr = {lr:g} is far too large")
    return NTPHistory(torch.tensor(logged_steps), torch.tensor(losses, dtype=data.H.dtype), torch.stack(iterates))


def ntp_gradient_descent_batch(datasets, steps: int, lr: float, log_steps=None) -> NTPHistory:
    """:func:`ntp_gradient_descent` from ``W0 = 0`` on ``B`` instances of the same shape
    (``m``, ``d``, ``V``) at once: ``loss (k, B)`` and ``iterates (k, B, V, d)`` at the steps
    ``log_steps`` (as in :func:`ntp_gradient_descent`). Each iterate is exactly that of its own run.
    Raises ``ValueError`` for an empty list, instances of different shapes, an overflow, or a final
    loss above the initial one on some instance (the step is too large)."""
    if not isinstance(datasets, (list, tuple)) or not datasets:
        raise ValueError("datasets must be a nonempty list of NTPData")
    datasets = [_data(d) for d in datasets]
    shapes = {(tuple(d.H.shape), tuple(d.P.shape)) for d in datasets}
    if len(shapes) != 1:
        raise ValueError(f"all instances must have the same shape (H, P); got {sorted(shapes)}")
    steps, lr = check_count(steps, "steps", 1), check_positive(lr, "lr")
    log_steps = check_log_steps(log_steps, steps)
    H, P = torch.stack([d.H for d in datasets]), torch.stack([d.P for d in datasets])   # (B, m, d), (B, m, V)
    pi = torch.stack([d.pi for d in datasets])                                           # (B, m)
    weighted_H = pi[..., None] * H
    W = torch.zeros(len(datasets), P.shape[2], H.shape[2], dtype=H.dtype)
    wanted, logged, losses, iterates = set(log_steps.tolist()), [], [], []
    for k in range(steps + 1):
        logp = torch.log_softmax(H @ W.transpose(1, 2), dim=-1)                           # (B, m, V)
        loss = (pi * -(P * logp).masked_fill(P <= SUPPORT_TOL, 0.0).sum(-1)).sum(-1)     # (B,)
        if k == 0:
            first = loss
        if k in wanted:
            logged.append(k)
            losses.append(loss)
            iterates.append(W.clone())
            if not bool(torch.isfinite(losses[-1]).all()):
                raise ValueError(f"the loss overflows at step {k}: the step lr = {lr:g} is far too large")
        if k == steps:
            break
        W = W - lr * (logp.exp() - P).transpose(1, 2) @ weighted_H
        if not bool(torch.isfinite(W).all()):
            raise ValueError(f"the iterates overflow at step {k + 1}: the step lr = {lr:g} is far too large")
    if bool((loss > first + 1e-12).any()):
        raise ValueError(f"the loss rose from {float(first.max()):.3g} to {float(loss.max()):.3g}: "
                         f"the step lr = {lr:g} is too large")
    return NTPHistory(torch.tensor(logged), torch.stack(losses), torch.stack(iterates))
