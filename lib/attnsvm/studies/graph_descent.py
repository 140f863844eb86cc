"""Gradient descent on the next-token model of :mod:`attnsvm.graph_svm` and the finite part of its
limit (Li, Huang, Ildiz, Rawat, Oymak, "Mechanics of next token prediction with self-attention",
AISTATS 2024; book page ch08b).

- :func:`graph_loss`: the log-loss ``L(W) = -(1/n) sum_s log(e_y^T X_s^T S(X_s W e_k))``: the
  probability of the next token is the attention mass on its copies, as in the authors' code
  (``train_utils.get_loss`` with ``cls_choice='iden'``, ``loss_type='nll'``, repository
  ``yixiao-huang/next-token-prediction``).
- :func:`graph_gradient_descent`: plain gradient descent on ``L``, batched over starts, with the
  gradient in closed form; the paper proves its direction tends to the Graph-SVM solution.
  :func:`graph_gradient_descent_batch` runs it on several datasets at once.
- :func:`graph_project` / :func:`graph_finite_part`: the component of ``W`` in the subspace of
  within-SCC score differences, and the finite ``W^fin`` that component converges to (the
  minimizer of the authors' reduced loss, ``data_utils.generate_reduced_ds``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..maxmargin.graph_svm import TokenData, _data, priority_graphs, priority_sccs
from ..model.utils import DEFAULT_DTYPE, as_array, check_count, check_log_steps, check_positive


def _weights(W, data: TokenData, name: str = "W") -> torch.Tensor:
    W = as_array(W, name).to(DEFAULT_DTYPE)
    K = data.vocab
    if W.ndim < 2 or tuple(W.shape[-2:]) != (K, K):
        raise ValueError(f"{name} must be (..., K, K) = (..., {K}, {K}), got {tuple(W.shape)}")
    if not bool(torch.isfinite(W).all()):
        raise ValueError(f"{name} has NaN/inf entries")
    return W


def _log_probs(W: torch.Tensor, data: TokenData) -> torch.Tensor:
    """``(..., n, K)``: log of the attention mass on each token (``-inf`` off the sequence)."""
    logits = W[..., :, data.queries].transpose(-1, -2) + data.counts.log()      # (..., n, K)
    return logits - torch.logsumexp(logits, dim=-1, keepdim=True)


def graph_loss(W, data: TokenData) -> torch.Tensor:
    """The log-loss ``-(1/n) sum_s log(attention mass on the label)`` of ``W (..., K, K)``."""
    data = _data(data)
    W = _weights(W, data)
    logp = _log_probs(W, data)
    return -logp.gather(-1, data.labels.expand(*logp.shape[:-2], -1).unsqueeze(-1)).squeeze(-1).mean(-1)


@dataclass(frozen=True)
class GraphHistory:
    """Gradient descent on :func:`graph_loss`: logged ``steps``, ``loss (k, ...)`` and ``iterates
    (k, ..., K, K)``."""

    steps: torch.Tensor
    loss: torch.Tensor
    iterates: torch.Tensor


def graph_gradient_descent(data: TokenData, steps: int, lr: float, W0=None, log_steps=None) -> GraphHistory:
    """Plain gradient descent ``W <- W - lr grad L(W)`` from ``W0`` (zeros ``(K, K)`` by default; a
    stack ``(B, K, K)`` runs ``B`` starts at once), with the closed-form gradient
    ``grad[j, k] = (1/n) sum_{s: last token k} (S_sj - 1[j = y_s])``, ``S_s`` the attention mass per
    token (the label's entry computed as minus the others', accurate when the softmax saturates).
    ``log_steps``: steps to record (default 0 and about 60 log-spaced ones), integers in
    ``[0, steps]``. Raises ``ValueError`` when the iterates or the loss overflow, or the last
    logged loss exceeds the first (the step is too large)."""
    data = _data(data)
    steps, lr = check_count(steps, "steps", 1), check_positive(lr, "lr")
    K, n = data.vocab, data.tokens.shape[0]
    W = torch.zeros(K, K, dtype=DEFAULT_DTYPE) if W0 is None else _weights(W0, data, "W0").clone()
    wanted = set(check_log_steps(log_steps, steps).tolist())
    queries = torch.nn.functional.one_hot(data.queries, K).to(DEFAULT_DTYPE) / n        # (n, K)
    labels = torch.nn.functional.one_hot(data.labels, K).bool()                           # (n, K)
    logged, losses, iterates = [], [], []
    for step in range(steps + 1):
        if step in wanted:
            logged.append(step)
            losses.append(graph_loss(W, data))
            iterates.append(W.clone())
            if not bool(torch.isfinite(losses[-1]).all()):
                raise ValueError(f"the loss overflows at step {step}: lr = {lr:g} is far too large")
        if step == steps:
            break
        mass = _log_probs(W, data).exp()                                                  # (..., n, K)
        others = mass.masked_fill(labels, 0.0)
        residual = torch.where(labels, -others.sum(-1, keepdim=True), others)
        W = W - lr * residual.transpose(-1, -2) @ queries
        if not bool(torch.isfinite(W).all()):
            raise ValueError(f"the iterates overflow at step {step + 1}: lr = {lr:g} is far too large")
    if len(losses) > 1 and bool((losses[-1] > losses[0] + 1e-12).any()):
        raise ValueError(f"the loss rose from {float(losses[0].max()):.3g} to {float(losses[-1].max()):.3g}: "
                         f"lr = {lr:g} is too large (the loss is 1/2-smooth: lr < 4 always descends)")
    return GraphHistory(torch.tensor(logged), torch.stack(losses), torch.stack(iterates))


def graph_gradient_descent_batch(datasets, steps: int, lr: float, log_steps=None) -> GraphHistory:
    """:func:`graph_gradient_descent` from ``W0 = 0`` on ``B`` datasets at once (the same
    ``vocab``; any ``n`` and ``T``): the datasets are padded to a common number of sequences with
    zero-weight rows, so each iterate is exactly that of its own run. Returns ``loss (k, B)`` and
    ``iterates (k, B, K, K)``. Raises ``ValueError`` for an empty list, different vocabularies, an
    overflow, or a loss that rises on some dataset (the step is too large)."""
    if not isinstance(datasets, (list, tuple)) or not datasets:
        raise ValueError("datasets must be a nonempty list of TokenData")
    datasets = [_data(d) for d in datasets]
    K = datasets[0].vocab
    if any(d.vocab != K for d in datasets):
        raise ValueError(f"all datasets must share one vocab; got {sorted({d.vocab for d in datasets})}")
    steps, lr = check_count(steps, "steps", 1), check_positive(lr, "lr")
    log_steps = check_log_steps(log_steps, steps)
    B, n = len(datasets), max(d.tokens.shape[0] for d in datasets)
    counts = torch.ones(B, n, K, dtype=DEFAULT_DTYPE)                    # padding rows: weight 0
    queries, labels = torch.zeros(B, n, dtype=torch.int64), torch.zeros(B, n, dtype=torch.int64)
    weight = torch.zeros(B, n, dtype=DEFAULT_DTYPE)
    for b, d in enumerate(datasets):
        m = d.tokens.shape[0]
        counts[b, :m], queries[b, :m], labels[b, :m], weight[b, :m] = d.counts, d.queries, d.labels, 1.0 / m
    log_counts = counts.log()
    query_hot = torch.nn.functional.one_hot(queries, K).to(DEFAULT_DTYPE)                # (B, n, K)
    label_hot = torch.nn.functional.one_hot(labels, K).bool()
    W = torch.zeros(B, K, K, dtype=DEFAULT_DTYPE)
    wanted, logged, losses, iterates = set(log_steps.tolist()), [], [], []
    for step in range(steps + 1):
        logits = torch.bmm(query_hot, W.transpose(1, 2)) + log_counts                    # (B, n, K)
        logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
        if step in wanted:
            logged.append(step)
            losses.append(-(weight * logp.masked_fill(~label_hot, 0.0).sum(-1)).sum(-1))
            iterates.append(W.clone())
            if not bool(torch.isfinite(losses[-1]).all()):
                raise ValueError(f"the loss overflows at step {step}: lr = {lr:g} is far too large")
        if step == steps:
            break
        others = logp.exp().masked_fill(label_hot, 0.0)
        residual = torch.where(label_hot, -others.sum(-1, keepdim=True), others) * weight[..., None]
        W = W - lr * torch.bmm(residual.transpose(1, 2), query_hot)
    if len(losses) > 1 and bool((losses[-1] > losses[0] + 1e-12).any()):
        raise ValueError(f"the loss rose on some dataset: lr = {lr:g} is too large (lr < 4 always descends)")
    return GraphHistory(torch.tensor(logged), torch.stack(losses), torch.stack(iterates))


def _within_basis(data: TokenData) -> np.ndarray:
    """Orthonormal columns spanning ``F = span{(e_a - e_b) e_k^T : a, b in one SCC of G^(k)}``
    (flattened row-major, index ``a * K + k``)."""
    graphs, sccs = priority_graphs(data), priority_sccs(data).numpy()
    K = data.vocab
    vectors = []
    for k in range(K):
        nodes = graphs[k].any(0) | graphs[k].any(1)
        for label in np.unique(sccs[k][nodes.numpy()]):
            members = np.flatnonzero((sccs[k] == label) & nodes.numpy())
            for a in members[1:]:
                v = np.zeros(K * K)
                v[a * K + k], v[members[0] * K + k] = 1.0, -1.0
                vectors.append(v)
    if not vectors:
        return np.zeros((K * K, 0))
    q, _ = np.linalg.qr(np.array(vectors).T)
    return q


def graph_project(W, data: TokenData) -> tuple[torch.Tensor, torch.Tensor]:
    """``(P_F W, W - P_F W)`` for ``W (..., K, K)``: the part in the subspace ``F`` of within-SCC score
    differences (the Graph-SVM solution is orthogonal to ``F``) and the rest."""
    data = _data(data)
    W = _weights(W, data)
    basis = torch.from_numpy(_within_basis(data))
    flat = W.flatten(-2)
    inside = ((flat @ basis) @ basis.T).reshape(W.shape)
    return inside, W - inside


def graph_finite_part(data: TokenData, tol: float = 1e-11) -> torch.Tensor:
    """``W^fin (K, K)`` in ``F``: the minimizer over ``F`` of the log-loss in which each sequence
    attends only to its tokens in the SCC of its label (the tokens the Graph-SVM direction keeps),
    the reduced loss of the authors' code (``data_utils.generate_reduced_ds``, trained there by
    ``train_utils.train_Wfin``); sequences with no other token of that SCC contribute 0. Newton's method until the gradient is below ``tol``;
    ``ValueError`` if it does not get there (it always should: the loss is coercive on ``F``)."""
    data = _data(data)
    tol = check_positive(tol, "tol")
    basis = torch.from_numpy(_within_basis(data))
    K = data.vocab
    if basis.shape[1] == 0:                         # every SCC is a single token
        return torch.zeros(K, K, dtype=DEFAULT_DTYPE)
    sccs = priority_sccs(data)
    own = sccs[data.queries][torch.arange(len(data.labels)), data.labels]              # (n,)
    keep = sccs[data.queries] == own[:, None]                                          # (n, K)
    mask_log = torch.where(keep, 0.0, -torch.inf)

    def loss(c: torch.Tensor) -> torch.Tensor:
        W = (basis @ c).reshape(K, K)
        logits = W[:, data.queries].T + data.counts.log() + mask_log
        logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
        return -logp.gather(-1, data.labels[:, None]).mean()

    c = torch.zeros(basis.shape[1], dtype=DEFAULT_DTYPE)
    for _ in range(100):
        grad = torch.autograd.functional.jacobian(loss, c)
        if float(grad.norm()) < tol:
            return (basis @ c).reshape(K, K)
        hess = torch.autograd.functional.hessian(loss, c)
        direction = -torch.linalg.lstsq(hess, grad[:, None], rcond=1e-12).solution[:, 0]
        t, value = 1.0, float(loss(c))
        slack = 1e-14 * max(1.0, abs(value))                  # rounding: near the optimum, accept Newton
        while float(loss(c + t * direction)) > value + 1e-4 * t * float(grad @ direction) + slack and t > 1e-10:
            t /= 2
        c = c + t * direction
    raise ValueError(f"Newton's method did not reach gradient {tol:g} for the finite part "
                     f"(last {float(grad.norm()):.1e})")
