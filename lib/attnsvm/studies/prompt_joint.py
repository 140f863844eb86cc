"""Joint training of the head ``v`` and the prompt ``p`` (paper B, experiment B3; book page 'What is proved where',
"Paper B, joint (v, p)"): the B3 instances, the library's exact run and the authors' float32
protocol of it, the logistic probability the authors plot, and the label margin of the v-SVM on
the mixed features ``r_i(p) = X_i^T S(K_i p)`` that the margin condition ("Assumption B") bounds.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..model.data import Problem
from ..model.heads import LinearHead
from ..maxmargin.jointsvm import v_svm
from ..model.models import PromptAttention
from ..maxmargin._svm_core import IllConditionedError, InfeasibleError
from ..model.train import History, train
from ..model.utils import DEFAULT_DTYPE, as_tensor, check_count, check_dtype, check_positive


def b3_problem(third, dtype: torch.dtype = DEFAULT_DTYPE) -> Problem:
    """Paper B's B3 instance: three inputs of two tokens in the plane, each with the token
    ``(0, 0)`` and one other: ``(1, 1)`` (label +1), ``(1, -1)`` (label -1) and ``third`` (label
    +1); ``(0.5, 1)`` is the authors' "tight" instance, ``(0.5, 1.5)`` the "relaxed" one. The head
    ``(0, 1)`` stored with it is a placeholder: B3 trains the head (:func:`joint_ngd`)."""
    third = as_tensor(third, "third", dtype=check_dtype(dtype))
    if tuple(third.shape) != (2,):
        raise ValueError(f"third must be one token of the plane, shape (2,), got {tuple(third.shape)}")
    X = torch.zeros(3, 2, 2, dtype=third.dtype)
    X[0, 1] = torch.tensor([1.0, 1.0], dtype=third.dtype)
    X[1, 1] = torch.tensor([1.0, -1.0], dtype=third.dtype)
    X[2, 1] = third
    return Problem(X, torch.tensor([1.0, -1.0, 1.0], dtype=third.dtype), torch.ones(3, 2, dtype=third.dtype),
                   torch.tensor([0.0, 1.0], dtype=third.dtype))


def _start(value, name: str, problem: Problem) -> torch.Tensor:
    value = as_tensor(value, name, dtype=problem.X.dtype)
    if tuple(value.shape) != (problem.d,):
        raise ValueError(f"{name} must have shape (d,) = ({problem.d},), got {tuple(value.shape)}")
    return value


def _one_instance(problem: Problem) -> Problem:
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if problem.batch_shape:
        raise ValueError(f"problem must be one instance (no trials dimension), got trials {problem.batch_shape}")
    return problem


def joint_ngd(problem: Problem, p0, v0, steps: int, lr: float = 0.1, **train_kw) -> tuple[History, torch.Tensor]:
    """Joint normalized GD on the prompt ``p`` (keys = tokens) and a trainable linear head ``v``
    (paper B's B3, the library's protocol: :func:`attnsvm.train` with ``head=LinearHead(v0)``, one
    normalization per block), in the problem's dtype. Returns the history (``p`` iterates recorded)
    and the head's iterates ``(steps + 1, d)``. ``train_kw`` go to :func:`attnsvm.train`."""
    problem = _one_instance(problem)
    p0, v0 = _start(p0, "p0", problem), _start(v0, "v0", problem)
    steps = check_count(steps, "steps", 1)
    if {"head", "record_iterates", "callback", "log_every"} & set(train_kw):
        raise ValueError("joint_ngd sets head, record_iterates, callback and log_every itself")
    head = LinearHead(v0)
    heads = []
    history = train(PromptAttention(p0), problem, steps=steps, lr=lr, method="ngd", head=head,
                    record_iterates=True, callback=lambda step, att: heads.append(head.params[0].detach().clone()),
                    **train_kw)
    return history, torch.stack(heads)


def authors_joint_ngd(problem: Problem, p0, v0, steps: int, lr: float = 0.1, eps_p: float = 1e-19,
                      eps_v: float = 1e-9) -> tuple[torch.Tensor, torch.Tensor]:
    """The authors' B3 protocol (their ``joint_training`` notebook), in the problem's dtype: the
    textbook softmax output ``X_i^T S(X_i p)``, the logistic loss written ``log(1 + exp(-Y f))``,
    and each block normalized by its own ``||g|| + eps`` (``eps_p`` for ``p``, ``eps_v`` for ``v``).
    Returns the iterates of ``p`` and of ``v``, each ``(steps + 1, d)``."""
    problem = _one_instance(problem)
    p0, v0 = _start(p0, "p0", problem), _start(v0, "v0", problem)
    steps, lr = check_count(steps, "steps", 1), check_positive(lr, "lr")
    eps_p, eps_v = check_positive(eps_p, "eps_p", allow_zero=True), check_positive(eps_v, "eps_v", allow_zero=True)
    X, Y = problem.X, problem.Y
    p, v = p0.clone().requires_grad_(True), v0.clone().requires_grad_(True)
    ps, vs = [p.detach().clone()], [v.detach().clone()]
    for _ in range(steps):
        out = torch.einsum("nt,ntd->nd", torch.softmax(X @ p, -1), X) @ v
        g_p, g_v = torch.autograd.grad(torch.log(1 + torch.exp(-Y * out)).mean(), (p, v))
        if not (bool(torch.isfinite(g_p).all()) and bool(torch.isfinite(g_v).all())):
            raise ValueError("the authors' protocol produced a non-finite gradient; lower lr or the data's scale")
        with torch.no_grad():
            p -= lr * g_p / (g_p.norm() + eps_p)
            v -= lr * g_v / (g_v.norm() + eps_v)
        ps.append(p.detach().clone())
        vs.append(v.detach().clone())
    return torch.stack(ps), torch.stack(vs)


def label_probability(prompts, heads, problem: Problem) -> torch.Tensor:
    """Mean over the inputs of the logistic probability ``sigma(Y_i v^T X_i^T S(X_i p))`` of the
    right label, for matching iterates ``prompts (steps, d)`` and ``heads (steps, d)`` (keys =
    tokens, as in B3): the second curve of paper B's B3 figure. Shape ``(steps,)``."""
    problem = _one_instance(problem)
    prompts = as_tensor(prompts, "prompts", dtype=problem.X.dtype)
    heads = as_tensor(heads, "heads", dtype=problem.X.dtype)
    if prompts.ndim != 2 or prompts.shape != heads.shape or prompts.shape[-1] != problem.d:
        raise ValueError(f"prompts and heads must both have shape (steps, d) with d = {problem.d}, "
                         f"got {tuple(prompts.shape)} and {tuple(heads.shape)}")
    s = torch.softmax(problem.mask_logits(torch.einsum("ntd,kd->knt", problem.X, prompts)), -1)
    outputs = torch.einsum("knd,kd->kn", torch.einsum("knt,ntd->knd", s, problem.X), heads)
    return torch.sigmoid(problem.Y * outputs).mean(-1)


def mixed_label_margin(features, Y) -> tuple[float, bool]:
    """The label margin ``gamma = max_{||v|| <= 1} min_i Y_i v^T r_i`` of features ``r_i``
    (``features (n, d)``, labels ``Y (n,)``): ``1 / ||v^mm||`` from the v-SVM
    (:func:`attnsvm.maxmargin.v_svm` on one-token sequences), 0 when no ``v`` separates them. Where float64
    cannot decide (features near 0, e.g. ``1e-10``: the solver raises
    :class:`attnsvm.IllConditionedError` or returns no finite solution), it returns the upper bound
    ``min_i ||r_i||`` instead. Returns ``(gamma, bound_used)``; the term of paper B's margin
    condition ("Assumption B") on the mixed features ``r_i(p) = X_i^T S(K_i p)``."""
    R = as_tensor(features, "features")
    if R.ndim != 2 or not R.numel():
        raise ValueError(f"features must have shape (n, d), non-empty, got {tuple(R.shape)}")
    try:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            objective = v_svm(R.unsqueeze(1), Y, [0] * len(R)).objective
    except InfeasibleError:
        return 0.0, False
    except IllConditionedError:
        return float(R.norm(dim=-1).min()), True
    if math.isfinite(objective) and objective > 0:
        return 1 / objective, False
    return float(R.norm(dim=-1).min()), True
