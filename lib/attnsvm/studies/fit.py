"""Training loops with measurements, for the optimizer and real-data chapters (book chapters 9, 10).

- :func:`train_until_gap`: a batch of runs trained in chunks, each run stopped once its smallest
  logit gap passes a threshold (chapter 9's stopping rule: past a gap of about 708 the competing
  softmax probabilities are subnormal in float64 and a normalized method's direction can drift).
- :func:`train_recorded`: :func:`attnsvm.train` with a record of the attention entropy, the top
  mass, the number of examples with several selected tokens and the train / test accuracy at every
  logged step (chapter 10's digits model).
- :class:`NormSVMCache`: the norm-SVMs of :func:`attnsvm.norm_svm`, each solved once, and
  :func:`margin_ratio`, a run's margin in a norm relative to that norm's SVM.
- :func:`logit_gaps`, :func:`smallest_margin`, :func:`attention_entropy`, :func:`accuracy`: the
  measurements themselves.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np
import torch

from ..model.data import Problem
from ..maxmargin.gensvm import selected_sets
from ..model.heads import Head, LinearHead, check_compatible, predict
from ..model.models import Attention
from ..maxmargin.normsvm import matrix_norm, norm_svm
from ..maxmargin.selections import _data_key
from ..maxmargin.svm import SVMResult
from ..model.train import History, train
from ..model.utils import as_array, as_tensor, check_count, check_positive

__all__ = ["NormSVMCache", "accuracy", "margin_ratio", "attention_entropy", "logit_gaps", "smallest_margin",
           "train_recorded", "train_until_gap"]


def _alpha_for(logits: torch.Tensor, alpha) -> torch.Tensor:
    alpha = as_tensor(alpha, "alpha", dtype=torch.int64)
    if tuple(alpha.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"alpha must have shape {tuple(logits.shape[:-1])} (one token per "
                         f"example), got {tuple(alpha.shape)}")
    if bool(((alpha < 0) | (alpha >= logits.shape[-1])).any()):
        raise ValueError(f"alpha must index tokens 0..{logits.shape[-1] - 1}")
    return alpha


def logit_gaps(logits, alpha) -> torch.Tensor:
    """Logits ``(*B, n, T)`` -> gaps ``a_{i alpha_i} - a_it`` of the same shape, ``+inf`` at
    ``t = alpha_i`` (the margins of Att-SVM's constraints, :prf:ref:`def-att-svm`)."""
    logits = as_tensor(logits, "logits")
    if logits.ndim < 2 or logits.shape[-1] < 2:
        raise ValueError(f"logits must have shape (..., n, T) with T >= 2, got {tuple(logits.shape)}")
    if not bool(torch.isfinite(logits).all()):
        raise ValueError("logits contain NaN or inf")
    alpha = _alpha_for(logits, alpha)
    gaps = logits.gather(-1, alpha.unsqueeze(-1)) - logits
    return gaps.scatter(-1, alpha.unsqueeze(-1), math.inf)


def smallest_top_gaps(logits: torch.Tensor) -> torch.Tensor:
    """Per trial (first dimension), the smallest gap between a position's largest logit and a
    competitor it may attend to: masked competitors (logit ``-inf``) and positions with nothing
    visible do not count (``+inf`` if no gap is left)."""
    top = logits.argmax(-1, keepdim=True)
    gaps = (logits.gather(-1, top) - logits).scatter(-1, top, math.inf)
    return gaps.nan_to_num(nan=math.inf, posinf=math.inf).flatten(1).min(1).values


def smallest_margin(W, problem: Problem, alpha) -> torch.Tensor:
    """The smallest logit margin ``min_{i, t != alpha_i} (x_{i alpha_i} - x_it)^T W z_i`` of each
    ``W`` (trials, d, d) on a problem with one trials dimension, for the selections ``alpha``
    (trials, n); shape (trials,)."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    W = as_tensor(W, "W")
    if problem.X.ndim != 4 or tuple(W.shape) != (problem.X.shape[0], problem.d, problem.d):
        raise ValueError(f"W must have shape (trials, d, d) = ({problem.X.shape[0]}, {problem.d}, "
                         f"{problem.d}) for a problem with one trials dimension; got W "
                         f"{tuple(W.shape)}, X {tuple(problem.X.shape)}")
    if not bool(torch.isfinite(W).all()):
        raise ValueError("W contains NaN or inf")
    logits = torch.einsum("bntd,bde,bne->bnt", problem.X, W.to(problem.X), problem.Z)
    return logit_gaps(logits, alpha).flatten(1).min(dim=1).values


def train_until_gap(make: Callable[..., Attention], params, problem: Problem, method: str, lr: float,
                    max_steps: int, chunk: int = 25, gap_stop: float = 400.0,
                    **kwargs) -> tuple[Attention, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Train a batch of runs (one per trial of ``problem``) in chunks of ``chunk`` steps of
    :func:`attnsvm.train`; a run stops at the end of the first chunk after which the smallest gap
    between its largest logit and the others exceeds ``gap_stop`` (or at ``max_steps``).

    The gap is tested after every chunk, so a run overshoots ``gap_stop`` by at most what it gains
    in one chunk; the returned gaps say by how much (book chapter 9: past a gap of about 708 the
    competing probabilities are subnormal in float64, and a caller should check that the gaps at
    stop stay well below it). ``make(*params)`` builds the attention from its parameter tensors
    (trials first), e.g. ``A.WAttention``; ``kwargs`` go to :func:`attnsvm.train`.

    Returns the final attention, the stopping step of each run, the angle (radians) its direction
    turned per step over its last chunk, and its smallest logit gap at the stop (``(trials,)``
    each). A run that never passed ``gap_stop`` also stops at ``max_steps``, as does one that
    passed it in the last chunk: whether a run reached the gap is ``gap > gap_stop``, never
    ``stop < max_steps``.
    """
    if not callable(make):
        raise TypeError(f"make must build an attention from its parameters, got {type(make).__name__}")
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if problem.X.ndim != 4:
        raise ValueError(f"problem must have one trials dimension (X of shape (trials, n, T, d)), "
                         f"got X {tuple(problem.X.shape)}")
    params = [as_tensor(p, "params").detach().clone() for p in params]
    B = problem.X.shape[0]
    if not params or any(p.ndim < 1 or p.shape[0] != B for p in params):
        raise ValueError(f"every parameter tensor must have the {B} trials first")
    max_steps, chunk = check_count(max_steps, "max_steps", 1), check_count(chunk, "chunk", 1)
    gap_stop = check_positive(gap_stop, "gap_stop")
    check_compatible(make(*params), problem)
    stop = torch.full((B,), max_steps)
    turn = torch.full((B,), math.nan, dtype=torch.float64)
    gap = torch.full((B,), math.nan, dtype=torch.float64)
    active = torch.ones(B, dtype=torch.bool)
    for start in range(0, max_steps, chunk):
        idx = active.nonzero().flatten()
        if len(idx) == 0:
            break
        steps = min(chunk, max_steps - start)
        att, part = make(*[p[idx] for p in params]), problem.select(idx)
        history = train(att, part, steps, lr, method, log_every=steps, **kwargs)
        for p, new in zip(params, att.params):
            p[idx] = new.detach()
        turn[idx] = history.turn[-1] / steps
        gap[idx] = smallest_top_gaps(att.logits(part).detach()).to(gap)
        done = gap[idx] > gap_stop
        stop[idx[done]] = start + steps
        active[idx[done]] = False
    return make(*params), stop, turn, gap


def attention_entropy(probabilities) -> torch.Tensor:
    """Normalized attention entropy ``-sum_t s_t log s_t / log T`` per softmax row (1 = uniform,
    0 = all weight on one token); ``(..., T)`` -> ``(...)``."""
    s = as_tensor(probabilities, "probabilities")
    if s.ndim < 1 or s.shape[-1] < 2:
        raise ValueError(f"probabilities must have shape (..., T) with T >= 2, got {tuple(s.shape)}")
    if not bool(torch.isfinite(s).all()) or bool((s < 0).any()) \
            or not bool(torch.allclose(s.sum(-1), torch.ones((), dtype=s.dtype), atol=1e-9)):
        raise ValueError("probabilities must be finite, non-negative and sum to 1 over the last axis")
    return -(s * s.clamp_min(1e-300).log()).sum(-1) / math.log(s.shape[-1])


def accuracy(attention: Attention, problem: Problem, head: Head | None = None) -> float:
    """The share of examples with ``sign f(X_i) = Y_i`` (a zero output counts as wrong)."""
    return float((predict(attention, problem, head).sign() == problem.Y).double().mean())


def _with_head(problem: Problem, v: torch.Tensor) -> Problem:
    return Problem(problem.X, problem.Y, problem.Z, v)


def train_recorded(attention: Attention, problem: Problem, steps: int, lr: float = 0.1, *,
                   test: Problem | None = None, head: LinearHead | None = None,
                   log_every: int | None = None, method: str = "ngd"
                   ) -> tuple[History, dict[str, np.ndarray], float]:
    """:func:`attnsvm.train` (iterates recorded) with a record at every logged step of: the mean
    attention entropy (``entropy``), the mean top probability (``top_mass``), the number of
    examples with more than one selected token (``multi``, :func:`attnsvm.maxmargin.selected_sets`), the
    accuracy on ``problem`` (``train``) and on ``test`` (``test``, NaN without one) read with the
    current head, its norm (``v_norm``), the loss and ``||W||_F`` (``norm``).

    ``head``: a trainable ``LinearHead`` (joint training) or None (the problem's fixed head).
    ``log_every`` defaults to ``steps // 20``. Returns the history, the curves and the seconds.
    """
    if head is not None and not isinstance(head, LinearHead):
        raise TypeError(f"head must be None or a LinearHead, got {type(head).__name__}")
    if test is not None and not isinstance(test, Problem):
        raise TypeError(f"test must be None or an attnsvm Problem, got {type(test).__name__}")
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if test is not None and (test.d != problem.d or test.X.shape[:-3] != problem.X.shape[:-3]):
        raise ValueError(f"test must have the training problem's d = {problem.d} and trials "
                         f"dimensions, got X {tuple(test.X.shape)}")
    steps = check_count(steps, "steps", 1)
    log_every = max(1, steps // 20) if log_every is None else check_count(log_every, "log_every", 1)
    rows: list[dict[str, float]] = []

    def record(step: int, att: Attention) -> None:
        v = head.params[0].detach() if head is not None and head.params else problem.v
        s = att.probabilities(problem)
        rows.append(dict(step=step, entropy=float(attention_entropy(s).mean()),
                         top_mass=float(s.max(-1).values.mean()),
                         multi=int((selected_sets(s)[0].sum(-1) > 1).sum()),
                         train=accuracy(att, _with_head(problem, v)),
                         test=accuracy(att, _with_head(test, v)) if test is not None else math.nan,
                         v_norm=float(v.norm())))

    start = time.perf_counter()
    history = train(attention, problem, steps, lr, method, head=head, log_every=log_every,
                    record_iterates=True, callback=record)
    seconds = time.perf_counter() - start
    curves = {key: np.array([r[key] for r in rows]) for key in rows[0]}
    curves["norm"] = history.norm.numpy()
    curves["loss"] = history.loss.numpy()
    return history, curves, seconds


class NormSVMCache:
    """Solutions of :func:`attnsvm.norm_svm`, each solved once (several optimizers reach the same
    selection). Keyed by the instance's data, the selection, the norm and ``diagonal``;
    ``seconds`` lists the wall time of every solve actually made."""

    def __init__(self) -> None:
        self._solutions: dict[tuple, SVMResult] = {}
        self.seconds: list[float] = []

    def solve(self, problem: Problem, trial: int, alpha, norm, diagonal: bool = False) -> SVMResult:
        """The norm-SVM of trial ``trial`` of a problem with one trials dimension."""
        if not isinstance(problem, Problem):
            raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
        if problem.X.ndim != 4:
            raise ValueError("problem must have one trials dimension (X of shape (trials, n, T, d))")
        trial = check_count(trial, "trial", 0)
        if trial >= problem.X.shape[0]:
            raise ValueError(f"trial must be below {problem.X.shape[0]}, got {trial}")
        one = problem.trial(trial)
        alpha_key = tuple(int(a) for a in as_tensor(alpha, "alpha", dtype=torch.int64).reshape(-1))
        key = (_data_key(one), alpha_key, str(norm), bool(diagonal))
        if key not in self._solutions:
            start = time.perf_counter()
            self._solutions[key] = norm_svm(one.X, one.Z, alpha, norm, diagonal=diagonal)
            self.seconds.append(time.perf_counter() - start)
        return self._solutions[key]


def margin_ratio(W, problem: Problem, alpha, norm, cache: NormSVMCache, diagonal: bool = False,
                 where=None) -> torch.Tensor:
    """The margin ratio ``rho(W) = gamma(W) ||W^mm||`` of each run (book chapter 9, the margin
    ratio after the definition "Att-SVM in a norm"): ``gamma(W)`` = the smallest logit margin for
    ``alpha`` divided by ``||W||`` in ``norm`` (:func:`attnsvm.maxmargin.matrix_norm`), ``W^mm`` the norm-SVM of
    the same selection (solved through ``cache``; ``diagonal``: over diagonal matrices). ``rho <= 1``,
    with equality exactly for a max-margin direction; it does not depend on which solution a
    solver returns where the solution set is not a point.

    ``W`` (trials, d, d), ``alpha`` (trials, n); ``where`` (trials,) bool: the runs to measure
    (NaN elsewhere; e.g. the saturated ones, whose selection is known to be feasible).
    """
    if not isinstance(cache, NormSVMCache):
        raise TypeError(f"cache must be an attnsvm NormSVMCache, got {type(cache).__name__}")
    gamma = smallest_margin(W, problem, alpha)
    B = len(gamma)
    if where is None:
        where = torch.ones(B, dtype=torch.bool)
    where = as_array(where, "where")
    if where.dtype != torch.bool:
        raise TypeError(f"where must be a boolean tensor (one flag per run), got {where.dtype}")
    if tuple(where.shape) != (B,):
        raise ValueError(f"where must have shape ({B},) (one flag per run), got {tuple(where.shape)}")
    alpha = as_tensor(alpha, "alpha", dtype=torch.int64)
    norms = matrix_norm(as_tensor(W, "W"), norm)
    if bool((norms == 0).any()):
        raise ValueError("a run has W = 0, which has no direction and no margin ratio")
    gamma = gamma / norms
    out = torch.full((B,), math.nan, dtype=torch.float64)
    for b in where.nonzero().flatten().tolist():
        out[b] = float(gamma[b]) * cache.solve(problem, b, alpha[b], norm, diagonal=diagonal).objective
    return out
