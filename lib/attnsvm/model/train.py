"""Gradient descent and its variants on the attention ERM (paper A sections 4-5, paper B
section 4; book chapters 2-4 and the numerics appendix), batched over trials.

Normalized GD takes ``theta <- theta - lr * g / ||g||`` on each parameter block and each trial
separately (the protocol of the papers' experiments). The two knobs of the authors' code are
available to reproduce their curves: ``eps`` (normalize by ``||g|| + eps``) and ``ridge`` (add
``ridge * sum ||theta||^2`` to the loss). Both default to 0: pure normalized GD with exact,
re-centred gradients.

The Polyak step takes ``theta <- theta - lr * (L - L*) / ||g||^2 * g`` with the true infimum
``L*`` of the risk (:func:`~attnsvm.model.gradients.optimal_risk`, the risk of all attention on the
optimal tokens), the difference ``L - L*`` computed without cancellation. Two steps make the
iterates pick other norms: **mirror descent** with potential ``(1/p) sum |theta_jk|^p`` keeps the
dual variable ``u = sign(theta) |theta|^(p-1)``, steps ``u <- u - lr g / ||g||_F`` and maps back
``theta = sign(u) |u|^(1/(p-1))`` (Julistiono, Tarzanagh and Azizan 2024); the **spectral** step
``theta <- theta - lr U V^T`` uses the polar factor of ``g = U S V^T`` (the update of the Muon
optimizer without momentum; a vector block steps along ``g / ||g||``).
"""

from __future__ import annotations

import math
import warnings
from typing import Callable

import torch

from .data import Problem
from .gradients import evaluate, excess_over_optimal, fixed_terms, supports
from .heads import Head, LinearHead, check_compatible, check_head, check_loss, risk_from_logits
from .models import Attention
from ._path_setup import _match_trials
from ._steps import (_block_normalize, _expand, _from_dual, _length, _polar, _polyak, _to_dual,
                    block_normalize)
from ._train_log import History, Recorder
from .utils import as_tensor, check_count, check_flag, check_positive


METHODS = ("gd", "ngd", "polyak", "mirror", "spectral", "sign")


class TrainingError(ValueError):
    """Training produced NaN or inf (step size too large, or data out of range)."""


def train(attention: Attention, problem: Problem, steps: int = 2000, lr: float = 0.1,
          method: str = "ngd", *, head: Head | None = None, loss: str = "logistic",
          reference: torch.Tensor | None = None, log_every: int = 1,
          record_iterates: bool = False, eps: float = 0.0, ridge: float = 0.0,
          stable: bool = True, max_step: float | None = None, p: float = 2.0,
          dual_norm: bool = False, warn: bool = True,
          callback: Callable[[int, Attention], None] | None = None) -> History:
    """Run ``steps`` iterations of GD (``method="gd"``), normalized GD (``"ngd"``) or the Polyak
    step (``"polyak"``, with the true infimum ``L*``; linear fixed head only) in place. The other
    steepest-descent steps: mirror descent (``"mirror"``, the lp potential), spectral descent
    (``"spectral"``: the polar factor of each matrix gradient) and sign descent (``"sign"``:
    ``theta <- theta - lr sign(grad)``, steepest descent for the entrywise max norm; Adam without
    momentum and with ``eps = 0``).

    Args:
        attention: the parameterization (its tensors are updated in place), e.g. ``WAttention``,
            of the problem's dtype and device (the dtype rule of :mod:`attnsvm.model.data`: parameters
            are not cast; ``reference`` is read in the problem's dtype).
        problem: the training set: with the parameters' trials shape, or without trials (then
            every trial trains on it, as on ``attnsvm.studies.repeat_instance``). Parameters without the
            problem's trials are refused: one model shared by ``B`` trials would descend the sum
            of their risks.
        head: ``LinearHead()`` (default: the problem's fixed ``v``), a trainable ``LinearHead(v)``
            (joint training, paper B) or an ``MLPHead``.
        reference: direction to track (same shape as ``attention.combined()``, or broadcastable).
        log_every: record every ``log_every``-th step (and the last). The default records every
            step, which the book's chapters index by step; on small problems it costs up to about
            twice an unlogged run (``bench/bench_training.py`` prints both): pass 10 or 100 when
            the trend is enough.
        eps, ridge: the authors' safeguards (the numerics appendix and chapter 3b); 0 = exact NGD.
        stable: re-centred softmax output (default) or the textbook formula.
        p: the exponent of the mirror-descent potential (``method="mirror"``), ``p > 1``.
        dual_norm: mirror descent only: normalize each gradient by its dual norm ``||g||_q``
            (``1/p + 1/q = 1``), the step of Julistiono, Tarzanagh and Azizan's experiments (their
            code; their theorem's step is not restated here), instead of its Frobenius norm (the
            default).
        max_step: the longest update allowed (all blocks together, per trial); None = no cap. The
            Polyak step needs one on runs that stay saturated on a selection other than ``opt``
            (a locally optimal one keeps them there; from one that is not, a run may leave):
            there ``L - L*`` stays positive while the gradient vanishes, so the step grows
            without bound, possibly within the first ~10 steps (chapter 4).
            On a global run the Polyak step becomes exactly 0 once the logit gaps pass ~745: the
            gradient underflows in float64 (``L - L*`` is then subnormal, or 0).
        warn: emit a :class:`FrozenWarning` when some trial froze (``History.frozen``: every update
            exactly 0 from some step on; the numerics appendix).
        callback: called as ``callback(step, attention)`` after each logged step.

    Returns the :class:`History`; raises :class:`TrainingError` on NaN/inf.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    p = check_positive(p, "p")
    if not p > 1:
        raise ValueError(f"the mirror-descent exponent p must be > 1, got {p}")
    dual_norm = check_flag(dual_norm, "dual_norm")
    if dual_norm and method != "mirror":
        raise ValueError(f"dual_norm applies to mirror descent only, not to method={method!r}")
    if method == "mirror" and max_step is not None:
        raise ValueError("max_step does not apply to mirror descent (its steps are taken in the "
                         "dual space); lower lr instead")
    steps, log_every = check_count(steps, "steps"), check_count(log_every, "log_every", 1)
    lr = check_positive(lr, "lr")
    eps = check_positive(eps, "eps", allow_zero=True)
    ridge = check_positive(ridge, "ridge", allow_zero=True)
    if max_step is not None:
        max_step = check_positive(max_step, "max_step")
    record_iterates, stable = check_flag(record_iterates, "record_iterates"), check_flag(stable, "stable")
    warn = check_flag(warn, "warn")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable as callback(step, attention), got {callback!r}")
    check_loss(loss)
    check_compatible(attention, problem)
    check_head(head, problem)
    if reference is not None:
        reference = as_tensor(reference, "reference", dtype=problem.X.dtype, device=problem.X.device)
        if not bool(reference.abs().amax() > 0):
            raise ValueError("reference must be a nonzero direction (e.g. an Att-SVM solution)")
        core = attention.core_dims[0]
        shape = tuple(attention.combined().shape)
        if reference.ndim < core or tuple(reference.shape[-core:]) != shape[-core:]:
            raise ValueError(f"reference has shape {tuple(reference.shape)}; it must end with "
                             f"{shape[-core:]}, the shape of the trained {attention.names[0]}")
    head = head or LinearHead()
    params = attention.params + head.params
    n_att = len(attention.params)                 # the attention's blocks come first in params
    core = attention.core_dims + head.core_dims
    problem = _per_trial(attention, problem, head)
    _check_start(attention, problem, params, method, p)
    trials = problem.batch_shape
    recorder = Recorder(trials, reference, record_iterates)
    closed_form = stable and not head.params and isinstance(head, LinearHead) and supports(attention)
    if method == "polyak" and not closed_form:
        raise ValueError("the Polyak step needs the problem's fixed linear head, the re-centred "
                         "softmax (stable=True) and a W, (K, Q) or p attention")
    fixed = fixed_terms(problem) if closed_form else None
    scratch = torch.empty(*trials, *problem.X.shape[-3:], dtype=problem.X.dtype,
                          device=problem.X.device) if closed_form else None
    duals = [_to_dual(q, p) for q in params] if method == "mirror" else None
    grad_mode = torch.is_grad_enabled()       # the caller's, for the callback
    with torch.no_grad():               # the gradients are closed-form or taken by autograd.grad
        for step in range(steps + 1):   # arguments checked above: the loop only checks finiteness
            if closed_form:
                evaluation = evaluate(attention, problem, loss, fixed, method == "polyak", scratch=scratch)
                risk, probs, grads = evaluation[:3]
            else:
                with torch.enable_grad():
                    logits = attention._logits(problem)
                    risk = risk_from_logits(logits, problem, head, loss, stable)
                    objective = risk.sum()
            if not _all_finite(risk):      # a NaN/inf parameter shows up here too
                raise TrainingError(f"the loss became NaN/inf at step {step}; lower lr or check the data")
            logged_now = step % log_every == 0 or step == steps
            if logged_now:
                if not closed_form:
                    probs = torch.softmax(logits.detach(), dim=-1)
                recorder.log(step, attention.combined(), risk, probs)
                if callback is not None:
                    with torch.set_grad_enabled(grad_mode):
                        callback(step, attention)
            if step == steps:
                recorder.log_length(torch.full_like(risk.detach(), float("nan")))
                break
            if not closed_form:
                grads = torch.autograd.grad(objective, params)
            if ridge:
                grads = [g + 2 * ridge * q for q, g in zip(params, grads)]
            if method == "ngd":
                updates = [_block_normalize(g, k, eps).mul_(lr) for g, k in zip(grads, core)]
            elif method == "polyak":
                excess = excess_over_optimal(evaluation, problem, loss)
                updates = _polyak(grads, core, excess, lr, max_step)
            elif method == "sign":
                updates = [lr * torch.sign(g) for g in grads]
            elif method == "spectral":
                updates = [lr * (_polar(g) if k == 2 else _block_normalize(g, k)) for g, k in zip(grads, core)]
            elif method == "mirror":
                for u, g, k in zip(duals, grads, core):
                    u -= lr * _block_normalize(g, k, q=p / (p - 1) if dual_norm else 2.0)
                updates = [q - _from_dual(u, p) for q, u in zip(params, duals)]
            else:
                updates = [lr * g for g in grads]
            if max_step is not None and method != "polyak":
                shrink = torch.clamp(max_step / _length(updates, core), max=1.0).nan_to_num(1.0)
                updates = [u * _expand(shrink, k) for u, k in zip(updates, core)]
            if logged_now or step == steps - 1:   # measured where recorded, and the last update
                length = _length(updates, core)
                moved = length if not head.params else _length(updates[:n_att], core[:n_att])
                recorder.log_update(step, moved)        # the attention froze if it is 0
                if logged_now:
                    recorder.log_length(length)
            for param, u in zip(params, updates):
                param -= u
            if not all(_all_finite(q) for q in params):
                raise TrainingError(f"a parameter became NaN/inf at step {step + 1} (it passed "
                                    "~1e308, or a callback wrote NaN); lower lr or start from a "
                                    "smaller point")
    history = recorder.history()
    if warn:
        _warn_frozen(history, problem.X.dtype)
    return history


class FrozenWarning(UserWarning):
    """Some trial of a training run froze: from some step on every update was exactly zero (the
    gradient underflowed), so its last ``turn`` of 0 says nothing about convergence."""


def _warn_frozen(history: History, dtype: torch.dtype) -> None:
    """Emit a :class:`FrozenWarning` naming how many trials froze and from which step."""
    frozen = history.frozen[history.frozen >= 0]
    if not len(frozen):
        return
    warnings.warn(f"{len(frozen)} of {history.frozen.numel()} trial(s) froze: every update was "
                  f"exactly 0 from step {int(frozen.min())} on (the gradient underflowed in {dtype} "
                  "once the softmax saturated, or the start is stationary, e.g. K = Q = 0); their "
                  "parameters are a fixed point of the floating-point iteration, not a converged "
                  "direction (History.frozen; unsettled() counts them). Stop before it (fewer "
                  "steps) or add the authors' ridge (ridge=torch.finfo(torch.float64).eps) to keep them moving",
                  FrozenWarning, stacklevel=3)


def _per_trial(attention: Attention, problem: Problem, head: Head) -> Problem:
    """The problem with the attention's trials shape (:func:`~attnsvm.model._path_setup._match_trials`:
    a problem without trials is shared by every trial); ``ValueError`` when a trained parameter
    lacks some of the run's trials: shared by several trials it would descend the sum of their
    risks (GD on ``B`` copies of a problem is GD with ``B`` times the step)."""
    problem = _match_trials(attention, problem, "training")
    for name, q, k in zip(head.names, head.params, head.core_dims):
        lead = tuple(q.shape[: q.ndim - k])
        if lead != problem.batch_shape:
            raise ValueError(f"training needs one set of parameters per trial: the head's {name} "
                             f"has trials shape {lead} and the run {problem.batch_shape} (the "
                             f"attention's and the problem's); give every trained parameter, "
                             f"the attention's and the head's, the same trials shape (e.g. "
                             f"{lead}, with a problem of those trials or none)")
    return problem


def _all_finite(values: torch.Tensor) -> bool:
    """Whether every entry is finite: its largest ``|entry|`` is (a NaN makes it NaN); one tensor
    operation instead of the four of ``isfinite(values).all()``."""
    top = values if values.numel() == 1 else torch.linalg.vector_norm(values, math.inf)
    return math.isfinite(top.item())


def _check_start(attention: Attention, problem: Problem, params: list[torch.Tensor], method: str,
                 p: float) -> None:
    """Refuse a start whose quantities leave float64's range (``ValueError``, saying why): the
    combined parameter or the logits overflow (parameters ~1e300, or factors ~1e160), or, for
    mirror descent, the dual variable ``|theta|^(p - 1)``. A start of 1e200 whose logits are finite
    trains normally: the softmax is saturated and the update is defined."""
    with torch.no_grad():
        combined = attention.combined()
        if not bool(torch.isfinite(combined).all()):
            raise ValueError(f"the starting {attention.names[0]}'s combined parameter overflows "
                             "float64 (factors of ~1e160 or more); start from a smaller point - the "
                             "direction is what the theory is about, so rescale it")
        logits = attention.logits(problem)
        if problem.mask is not None:
            logits = logits.masked_fill(~problem.mask, 0.0)
        if not bool(torch.isfinite(logits).all()):
            raise ValueError("the logits x^T W z overflow float64 at this start (parameters ~1e300 "
                             "times the data); start from a smaller point with the same direction")
        if method == "mirror" and not all(bool(torch.isfinite(_to_dual(q, p)).all()) for q in params):
            raise ValueError(f"mirror descent's dual variable |theta|^(p - 1) overflows float64 at "
                             f"this start (p = {p}); start from a smaller point")


