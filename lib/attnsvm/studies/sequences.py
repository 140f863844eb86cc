"""Sequence self-attention, full and causal (book chapter 8): random sequence instances, a direct
reference implementation of (causal) self-attention, the feasibility tests of the chapter's
proposition on the sequence SVM, and normalized gradient descent that stops each run on its logit
gap (before the softmax weights of its competitors become subnormal in float64).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..model.data import Problem
from .fit import smallest_top_gaps
from ..model.heads import LOSSES
from ..maxmargin.jointsvm import least_distance
from ..model.models import WAttention
from ..model.train import train
from ..model.utils import DEFAULT_DTYPE, as_array, as_tensor, check_count, check_positive


def random_sequences(n: int, T: int, d: int, trials: int, generator: torch.Generator,
                     keep: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unit-norm Gaussian tokens ``X (trials, n, T, d)``, one random label per position
    ``Y (trials, n, T)`` and a unit head ``v (trials, d)``, float64. All ``trials`` are drawn and
    only the first ``keep`` returned, so every scale of a study uses the same draws."""
    n, T, d = (check_count(x, name, 1) for x, name in ((n, "n"), (T, "T"), (d, "d")))
    trials = check_count(trials, "trials", 1)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator (A.set_seed), got {type(generator).__name__}")
    keep = trials if keep is None else check_count(keep, "keep", 1)
    if keep > trials:
        raise ValueError(f"keep = {keep} exceeds trials = {trials}")
    X = torch.randn(trials, n, T, d, generator=generator, dtype=DEFAULT_DTYPE)
    X = X / X.norm(dim=-1, keepdim=True)
    Y = torch.randint(0, 2, (trials, n, T), generator=generator).to(DEFAULT_DTYPE) * 2 - 1
    v = torch.randn(trials, d, generator=generator, dtype=DEFAULT_DTYPE)
    return X[:keep], Y[:keep], (v / v.norm(dim=-1, keepdim=True))[:keep]


def self_attention_reference(W, X, Y, v, causal: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Self-attention written out from the chapter's definition, independently of ``Problem``:
    logits ``[i, k, t] = x_it^T W x_ik`` (``-inf`` for ``t > k`` when ``causal``), softmax over ``t``,
    predictions ``f_ik = v^T X_i^T s_ik``. ``X (n, T, d)``, ``Y (n, T)``, ``v (d,)``, ``W (d, d)``.
    Returns the predictions ``(n, T)``, the logistic risk and the probabilities ``(n, T, T)``."""
    W, X, Y, v = (as_tensor(a, name) for a, name in ((W, "W"), (X, "X"), (Y, "Y"), (v, "v")))
    if X.ndim != 3 or Y.shape != X.shape[:2] or v.shape != X.shape[2:] or W.shape != (X.shape[2],) * 2:
        raise ValueError(f"need X (n, T, d), Y (n, T), v (d,), W (d, d); got {tuple(X.shape)}, "
                         f"{tuple(Y.shape)}, {tuple(v.shape)}, {tuple(W.shape)}")
    logits = torch.einsum("ntd,de,nke->nkt", X, W, X)
    if causal:
        T = X.shape[1]
        logits = logits.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -torch.inf)
    s = torch.softmax(logits, dim=-1)
    f = torch.einsum("nkt,ntd,d->nk", s, X, v)
    return f, LOSSES["logistic"](Y * f).mean(), s


def cover_fraction(T: int, d: int) -> float:
    """Cover (1965): the share ``C(T, d) / 2^T`` of the labellings of ``T`` points in general
    position in ``R^d`` that a hyperplane through the origin separates,
    ``C(T, d) = 2 sum_{j < d} binom(T - 1, j)``."""
    T, d = check_count(T, "T", 1), check_count(d, "d", 1)
    return 2 * sum(math.comb(T - 1, j) for j in range(d)) / 2 ** T


def separable_through_origin(points, labels) -> bool | torch.Tensor:
    """Is there ``a`` with ``labels_j a^T points_j > 0`` for every ``j``? (The v-SVM of the points
    is feasible, decided exactly by NNLS.) ``points (m, d)``, ``labels (m,)`` in ``{-1, +1}``:
    a ``bool``; or batches ``points (*B, m, d)``, ``labels (*B, m)``: a boolean tensor ``(*B,)``,
    one verdict per set. Raises :class:`IllConditionedError` where float64 cannot decide."""
    points, labels = as_tensor(points, "points"), as_tensor(labels, "labels")
    if points.ndim < 2 or labels.shape != points.shape[:-1]:
        raise ValueError(f"points must be (*B, m, d) and labels (*B, m); got {tuple(points.shape)}, "
                         f"{tuple(labels.shape)}")
    *batch, m, d = points.shape
    if m < 1 or d < 1:
        raise ValueError(f"points has shape {tuple(points.shape)}: need m >= 1 points and d >= 1")
    if not bool(((labels == 1) | (labels == -1)).all()):
        raise ValueError("labels must be -1 or +1")
    verdicts = [_separable(x, y) for x, y in zip(_float64(points).reshape(-1, m, d),
                                                 _float64(labels).reshape(-1, m))]
    return verdicts[0] if not batch else torch.tensor(verdicts).reshape(batch)


def _float64(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().to(device="cpu", dtype=torch.float64).numpy()


def _separable(points: np.ndarray, signs: np.ndarray) -> bool:
    """The feasibility test of the v-SVM (:func:`attnsvm.maxmargin.v_svm` on one token per example):
    ``{a : signs_j a^T points_j >= 1}`` is non-empty."""
    return least_distance(signs[:, None] * points, np.ones(len(signs))) is not None


def causal_pairs_separable(X, selection) -> bool | torch.Tensor:
    """The chapter's necessary condition for the causal sequence SVM of a selection: for every
    sequence ``i`` and selected tokens ``j < j2``, the positions ``k >= j2`` (they see both) that
    select ``j`` and those that select ``j2`` are separable through the origin. ``X (n, T, d)``,
    ``selection (n, T)`` (position 0 is ignored: it sees one token): a ``bool``; or batches
    ``X (*B, n, T, d)``, ``selection (*B, n, T)``: a boolean tensor ``(*B,)``."""
    X, sel = as_tensor(X, "X"), as_array(selection, "selection")
    if X.ndim < 3 or tuple(sel.shape) != tuple(X.shape[:-1]) or sel.is_floating_point():
        raise ValueError(f"X must be (*B, n, T, d) and selection (*B, n, T) integer; got "
                         f"{tuple(X.shape)}, {tuple(sel.shape)} {sel.dtype}")
    *batch, n, T, d = X.shape
    verdicts = [_pairs_separable(x, s) for x, s in zip(_float64(X).reshape(-1, n, T, d),
                                                       sel.cpu().numpy().reshape(-1, n, T))]
    return verdicts[0] if not batch else torch.tensor(verdicts).reshape(batch)


def _pairs_separable(X: np.ndarray, sel: np.ndarray) -> bool:
    """:func:`causal_pairs_separable` of one instance ``X (n, T, d)``, ``sel (n, T)``."""
    for i in range(X.shape[0]):
        chosen = sorted(set(sel[i, 1:].tolist()))
        for a, j in enumerate(chosen):
            for j2 in chosen[a + 1:]:
                pos = j2 + np.flatnonzero((sel[i, j2:] == j) | (sel[i, j2:] == j2))
                signs = np.where(sel[i, pos] == j, 1.0, -1.0)
                if 0 < int((signs > 0).sum()) < len(pos) and not _separable(X[i, pos], signs):
                    return False
    return True


def smallest_logit_gaps(W, problem: Problem) -> torch.Tensor:
    """Per trial, the smallest gap between each position's top logit and a competitor it may attend
    to (masked tokens and positions with a single visible token do not count: ``+inf`` if none).
    ``W (trials, d, d)`` on a problem with one trials dimension."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    W = as_tensor(W, "W")
    if problem.X.ndim != 4 or tuple(W.shape) != (problem.X.shape[0], problem.d, problem.d):
        raise ValueError(f"W must be (trials, d, d) for a problem with one trials dimension; got W "
                         f"{tuple(W.shape)}, X {tuple(problem.X.shape)}")
    return smallest_top_gaps(WAttention(W).logits(problem).detach())


def ngd_until_gap(problem: Problem, steps: int, lr: float, gap_stop: float, chunk: int):
    """Normalized GD on ``W`` from 0, batched over the trials of ``problem``, in chunks of ``chunk``
    steps; a run stops (its ``W`` frozen) at the end of the first chunk after which its
    :func:`smallest_logit_gaps` exceeds ``gap_stop`` (keep it below ~700: past ~708 the softmax
    weights of the competitors are subnormal in float64). Returns ``(W (trials, d, d), iterates
    (chunks + 1, trials, d, d) logged at steps 0, chunk, 2 chunk, ..., stop step per trial)``.
    A run that never passed ``gap_stop`` stops at ``steps``, as does one that passed it in the
    last chunk: whether a run reached the gap is its final gap against ``gap_stop``."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    steps, chunk = check_count(steps, "steps", 1), check_count(chunk, "chunk", 1)
    lr, gap_stop = check_positive(lr, "lr"), check_positive(gap_stop, "gap_stop", upper=700.0)
    if steps % chunk:
        raise ValueError(f"steps = {steps} must be a multiple of chunk = {chunk}")
    if problem.X.ndim != 4:
        raise ValueError(f"problem must have one trials dimension, got X {tuple(problem.X.shape)}")
    B, d = problem.X.shape[0], problem.d
    W = torch.zeros(B, d, d, dtype=problem.X.dtype)
    stop = torch.full((B,), steps)
    active = torch.ones(B, dtype=torch.bool)
    iterates = [W.clone()]
    for start in range(0, steps, chunk):
        idx = active.nonzero().flatten()
        if len(idx):
            att = WAttention(W[idx].clone())
            train(att, problem.select(idx), chunk, lr, "ngd", log_every=chunk)
            W[idx] = att.W.detach()
            done = smallest_logit_gaps(W[idx], problem.select(idx)) > gap_stop
            stop[idx[done]] = start + chunk
            active[idx[done]] = False
        iterates.append(W.clone())
    return W, torch.stack(iterates), stop
