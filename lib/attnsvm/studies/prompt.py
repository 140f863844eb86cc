"""Prompt attention (paper B; book page 'What is proved where'): the instances of the experiments B1, B2 and B4,
the probability a batch of prompts puts on selected tokens, the curve diagnostics of the book's
chapter 7 (first crossing, first departure, float32 saturation onset, growth per unit of log k)
and the closed-form offset of the B4 path (the book's proposition prop-b4-offset, ours).

The B3 instances and the joint ``(v, p)`` runs are in :mod:`attnsvm.studies.prompt_joint`.
"""

from __future__ import annotations

import math

import torch
from scipy.optimize import brentq

from ..model.data import Problem
from ..model.metrics import _indices, probability_on
from ..model.models import PromptAttention
from ..model.utils import DEFAULT_DTYPE, as_tensor, check_count, check_dtype, check_positive, check_real, set_seed

B_KEY_MATRIX = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))
"""Paper B's key matrix ``W_k = diag(1, 1, 0)`` of B1, B2 and B4: a token's key is its first two
coordinates, its third coordinate is its score under the head ``e_3``."""

OFFSET_LOSSES = ("linear", "logistic", "exponential")


def _head_e3(n: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Labels +1, queries 1 (ignored by prompt attention) and the head ``e_3``."""
    return (torch.ones(n, dtype=dtype), torch.ones(n, 3, dtype=dtype),
            torch.tensor([0.0, 0.0, 1.0], dtype=dtype))


def b1_problem(third_score: float, dtype: torch.dtype = DEFAULT_DTYPE) -> Problem:
    """Paper B's B1 instance: one input of three tokens ``(-0.1, 1, 1)``, ``(1, 0, 0.9)`` and
    ``(0, 0, third_score)``, label +1, head ``e_3`` (use the keys ``X @ B_KEY_MATRIX``). The authors'
    global panel has ``third_score = 0.9``, the local panel 0."""
    third_score = check_real(third_score, "third_score")
    dtype = check_dtype(dtype)
    X = torch.tensor([[[-0.1, 1.0, 1.0], [1.0, 0.0, 0.9], [0.0, 0.0, third_score]]], dtype=dtype)
    return Problem(X, *_head_e3(1, dtype))


def b2_problem(seed: int, n: int = 3, T: int = 7, sigma: float = 0.2) -> Problem:
    """Paper B's B2 instance (float64): ``n`` inputs of ``T`` tokens, label +1, head ``e_3``.
    Token 1's key is near ``(1, 0)``, tokens ``2 .. (T + 1) // 2`` near ``(-1, 1)``, the rest near
    ``(-0.5, -0.5)``, "near" meaning plus ``sigma * torch.randn((n, T, 3))`` drawn in float32 from
    :func:`attnsvm.set_seed` ``(seed)`` (seed 0 = the authors' draw); the third coordinate is then
    the score: 1 for token 1, 0.5 for the others."""
    n, T = check_count(n, "n", 1), check_count(T, "T", 2)
    sigma = check_positive(sigma, "sigma", allow_zero=True)
    g = set_seed(seed)
    f64 = torch.float64
    X = (sigma * torch.randn(n, T, 3, generator=g)).to(f64)
    X[:, 0, :2] += torch.tensor([1.0, 0.0], dtype=f64)
    X[:, 1:(T + 1) // 2, :2] += torch.tensor([-1.0, 1.0], dtype=f64)
    X[:, (T + 1) // 2:, :2] += torch.tensor([-0.5, -0.5], dtype=f64)
    X[:, 0, 2], X[:, 1:, 2] = 1.0, 0.5
    return Problem(X, *_head_e3(n, f64))


def b4_problem(scores, dtype: torch.dtype = DEFAULT_DTYPE) -> Problem:
    """Paper B's B4 family, one instance per score ``C`` in ``scores`` (a leading trials dimension):
    input 1 is ``{(0, 0, 0), (1, 1, C)}``, input 2 is ``{(0, 0, 0), (1, -1, 1)}``, labels +1, head
    ``e_3``. With :data:`B_KEY_MATRIX` the p-SVM of the second tokens is ``(1, 0, 0)`` for every C."""
    C = as_tensor(scores, "scores", dtype=check_dtype(dtype))
    if C.ndim != 1 or not C.numel():
        raise ValueError(f"scores must be a non-empty list of values C, got shape {tuple(C.shape)}")
    X = torch.zeros(len(C), 2, 2, 3, dtype=C.dtype)
    X[:, :, 1, 0] = 1.0
    X[:, 0, 1, 1], X[:, 1, 1, 1] = 1.0, -1.0
    X[:, 0, 1, 2], X[:, 1, 1, 2] = C, 1.0
    Y, Z, v = _head_e3(2, C.dtype)
    return Problem(X, Y.expand(len(C), 2), Z.expand(len(C), 2, 3), v.expand(len(C), 3))


def selected_probability(prompts, problem: Problem, alpha, key_matrix=None) -> torch.Tensor:
    """The softmax probability ``s_{i alpha_i}(p)`` that each prompt ``p`` of ``prompts (..., d')``
    puts on the selected token of each input of the one-instance ``problem``, shape ``(..., n)``,
    computed in the prompts' dtype (logits ``K_i p`` with keys ``K_i = X_i key_matrix``; paper B's
    model). Average over the last axis for the curves the authors plot."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if problem.batch_shape:
        raise ValueError(f"problem must be one instance (no trials dimension), got trials "
                         f"{problem.batch_shape}; pass problem.trial(b)")
    prompts = as_tensor(prompts, "prompts", dtype=None)
    if prompts.ndim < 1 or not prompts.numel():
        raise ValueError(f"prompts must have shape (..., d'), non-empty, got {tuple(prompts.shape)}")
    attention = PromptAttention(prompts, key_matrix=key_matrix)     # checks the key matrix
    keys = problem.X.to(prompts.dtype)
    if attention.key_matrix is not None:
        keys = keys @ attention.key_matrix
    if keys.shape[-1] != prompts.shape[-1]:
        raise ValueError(f"prompts have dimension {prompts.shape[-1]}, the keys {keys.shape[-1]} "
                         "(pass the key matrix that maps tokens to keys)")
    logits = problem.mask_logits(torch.einsum("ntd,...d->...nt", keys, prompts))
    return probability_on(torch.softmax(logits, dim=-1), alpha)


def _curve(values, name: str) -> torch.Tensor:
    values = as_tensor(values, name, dtype=None)
    if values.ndim != 1 or not values.numel():
        raise ValueError(f"{name} must be a non-empty curve of shape (steps,), got {tuple(values.shape)}")
    return values


def first_crossing(values, threshold: float) -> int | None:
    """The first index at which the curve ``values (steps,)`` is at least ``threshold``; None if
    it never is (e.g. the first step at which a probability passes 0.99, paper B's B3 figure)."""
    values = _curve(values, "values")
    threshold = check_real(threshold, "threshold")
    hit = (values >= threshold).nonzero()
    return int(hit[0]) if len(hit) else None


def first_departure(curve, reference, tol: float = 1e-3) -> int | None:
    """The first index at which ``curve`` lies more than ``tol`` *below* ``reference`` (two curves
    of one length, e.g. correlations of a float32 run and of the exact float64 run); None if never.
    One-sided on purpose: it detects a run that falls behind."""
    curve, reference = _curve(curve, "curve"), _curve(reference, "reference")
    if curve.shape != reference.shape:
        raise ValueError(f"curve {tuple(curve.shape)} and reference {tuple(reference.shape)} must "
                         "have the same length")
    tol = check_positive(tol, "tol")
    below = (reference.double() - curve.double()) > tol
    return int(below.nonzero()[0]) if bool(below.any()) else None


def saturation_onset(iterates, problem: Problem, alpha, key_matrix=None) -> int | None:
    """The first step at which some selected probability ``s_{i alpha_i}`` is *exactly* 1.0 in
    the iterates' precision (:func:`selected_probability` of ``iterates (steps, d')``), or None.
    From that step the textbook softmax gradient loses the selected token's term (the book's
    float32 section); the test needs no tolerance."""
    iterates = as_tensor(iterates, "iterates", dtype=None)
    if iterates.ndim != 2:
        raise ValueError(f"iterates must have shape (steps, d'), got {tuple(iterates.shape)}")
    saturated = (selected_probability(iterates, problem, alpha, key_matrix) == 1.0).any(-1)
    hit = saturated.nonzero()
    return int(hit[0]) if len(hit) else None


def selected_term_error(iterates, problem: Problem, alpha, key_matrix=None, heads=None) -> torch.Tensor:
    """Relative error, per step and input (shape ``(steps, n)``), of the selected token's term of the
    textbook softmax gradient, ``s_alpha (nu_alpha - sum_t s_t nu_t)`` with ``nu_t = v^T x_t``, as
    the softmax backward forms it in the iterates' precision, against its exact value
    ``s_alpha sum_t s_t (nu_alpha - nu_t)`` in float64 (the book's float32 section: the term is lost
    gradually as ``s_alpha`` nears 1, entirely once it rounds to 1). ``iterates (steps, d')`` are
    prompts; ``heads (steps, d)`` the matching heads of a joint run, else the problem's head ``v``.
    Where the exact term is 0 the error is 0 if the computed term is 0 too, else inf."""
    iterates = as_tensor(iterates, "iterates", dtype=None)
    if iterates.ndim != 2:
        raise ValueError(f"iterates must have shape (steps, d'), got {tuple(iterates.shape)}")
    selected_probability(iterates, problem, alpha, key_matrix)        # checks problem, alpha, keys
    heads = problem.v.expand(len(iterates), problem.d) if heads is None else as_tensor(heads, "heads", dtype=None)
    if tuple(heads.shape) != (len(iterates), problem.d):
        raise ValueError(f"heads must have shape (steps, d) = ({len(iterates)}, {problem.d}), "
                         f"got {tuple(heads.shape)}")
    key_matrix = PromptAttention(iterates, key_matrix=key_matrix).key_matrix
    idx = _indices(alpha, (problem.n,), problem.T, iterates.device).expand(len(iterates), -1).unsqueeze(-1)
    terms = []
    for dtype in (iterates.dtype, torch.float64):
        keys = problem.X.to(dtype) if key_matrix is None else problem.X.to(dtype) @ key_matrix.to(dtype)
        logits = problem.mask_logits(torch.einsum("ntd,kd->knt", keys, iterates.to(dtype)))
        nu = torch.einsum("ntd,kd->knt", problem.X.to(dtype), heads.to(dtype))          # (steps, n, T)
        if not terms:           # the textbook backward, s_a (nu_a - s^T nu), by autograd as in training
            logits.requires_grad_(True)
            grad = torch.autograd.grad((torch.softmax(logits, -1) * nu).sum(), logits)[0]
            terms.append(grad.gather(-1, idx).squeeze(-1).double())
        else:                   # exact: pairwise differences, no cancellation
            s = torch.softmax(logits, -1)
            s_a, nu_a = s.gather(-1, idx).squeeze(-1), nu.gather(-1, idx).squeeze(-1)
            terms.append(s_a * (s * (nu_a.unsqueeze(-1) - nu)).sum(-1))
    computed, exact = terms
    error = (computed - exact).abs() / exact.abs()
    return torch.where(exact == 0, torch.where(computed == 0, 0.0, torch.inf).to(error.dtype), error)


def log_growth_rate(norms, k0: int, k1: int) -> torch.Tensor:
    """Growth of ``norms (steps + 1, ...)`` per unit of ``log k`` between the steps ``k0 < k1``:
    ``(norms[k1] - norms[k0]) / log(k1 / k0)``. Constant for ``a log k + b`` (plain GD on p,
    paper B's B2); linear growth makes it grow like ``k``."""
    norms = as_tensor(norms, "norms", dtype=None)
    k0, k1 = check_count(k0, "k0", 1), check_count(k1, "k1", 1)
    if not k0 < k1 < len(norms):
        raise ValueError(f"need 1 <= k0 < k1 < {len(norms)} (the curve's length), got k0={k0}, k1={k1}")
    return (norms[k1] - norms[k0]) / math.log(k1 / k0)


def _log_derivative(u: float, loss: str) -> float:
    """``log(-loss'(u))``, stable for large ``u``."""
    if loss == "linear":
        return 0.0
    if loss == "exponential":
        return -u
    return -(u + math.log1p(math.exp(-u))) if u > 30 else -math.log1p(math.exp(u))


def b4_offset(C: float, loss: str = "logistic") -> float:
    """The limit offset ``p_2*`` of the B4 path (the book's proposition prop-b4-offset, ours):
    ``e^{2 p_2*} = C loss'(C) / loss'(1)``, i.e. ``log(C) / 2`` for ``loss(u) = -u`` and
    ``(log C + log(1 + e) - log(1 + e^C)) / 2`` for the logistic loss; ``"exponential"``:
    ``(log C - C + 1) / 2``."""
    C = check_positive(C, "C")
    if loss not in OFFSET_LOSSES:
        raise ValueError(f"loss must be one of {', '.join(map(repr, OFFSET_LOSSES))}, got {loss!r}")
    if loss == "logistic" and C <= 30:         # the proposition's formula, term by term
        return (math.log(C) + math.log1p(math.e) - math.log1p(math.exp(C))) / 2
    return (math.log(C) + _log_derivative(C, loss) - _log_derivative(1.0, loss)) / 2


def logistic_offset_turns() -> tuple[float, float]:
    """Where the logistic offset ``f(C) =`` :func:`b4_offset` ``(C)`` turns: ``(c_max, c_0)``, the
    maximum of ``f`` (``C sigma(C) = 1``, in ``(1, 2)``) and its second zero (in ``(1.5, 2)``;
    ``f(1) = 0``), both by Brent's method to 1e-14. ``f > 0`` on ``(1, c_0)``, ``f < 0`` beyond."""
    c_max = brentq(lambda C: 1 / C - 1 / (1 + math.exp(-C)), 1.0, 2.0, xtol=1e-14)
    c_0 = brentq(b4_offset, 1.5, 2.0, xtol=1e-14)
    return c_max, c_0
