"""The linear precursors of chapter 9: descent geometry and the lp max-margin classifier.

For separable linear classification (points ``x_i``, labels ``y_i`` in {-1, +1}, no bias) the
lp max-margin classifier is ::

    w^mm_p = argmin ||w||_p   s.t.  y_i <w, x_i> >= 1   for all i.

Gunasekar, Lee, Soudry and Srebro (2018, "Characterizing implicit bias in terms of optimization
geometry") prove that steepest descent with respect to a norm, with the exponential loss and
bounded step sizes, maximizes the margin in that norm (sign descent: the l-infinity one); Sun,
Ahn, Thrampoulidis and Azizan (2022, "Mirror descent maximizes generalized margin and can be
implemented efficiently") prove that mirror descent with the potential ``(1/p) ||w||_p^p``
("p-GD"), exponential loss and a small enough fixed step converges in direction to ``w^mm_p``.

:func:`linear_max_margin` solves the max-margin problem (through :func:`attnsvm.norm_svm`: one
token ``y_i x_i`` against a zero token, diagonal W, all-ones query, which is exactly the problem
above) and verifies the constraints itself. :func:`linear_descent` runs the descents, batched over
independent data sets. :func:`separable_data` draws the instances.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..maxmargin.normsvm import norm_svm
from ..maxmargin._svm_core import IllConditionedError, InfeasibleError
from ..model.utils import DEFAULT_DTYPE, as_tensor, check_count, check_flag, check_generator, check_positive

__all__ = ["LinearDescent", "LinearMaxMargin", "LINEAR_METHODS", "linear_descent", "linear_margin",
           "linear_max_margin", "separable_data"]

LINEAR_METHODS = ("steepest", "mirror")
_LOSSES = ("exponential", "logistic")
MARGIN_TOL = 1e-6          # a verified solution meets every constraint to this tolerance


@dataclass(frozen=True)
class LinearMaxMargin:
    """The lp max-margin classifier of one data set: ``w`` (d,), ``p``, ``objective`` = ``||w||_p``
    (1 / the largest normalized margin), ``margin`` = ``min_i y_i <w, x_i>`` (verified >= 1 - 1e-6)
    and ``unique`` (False for p = 1 and p = inf, whose solution set may not be a point)."""

    w: torch.Tensor
    p: float
    objective: float
    margin: float
    unique: bool


@dataclass(frozen=True)
class LinearDescent:
    """A batch of descent runs: ``steps`` (K,) the logged steps (0 first), ``iterates`` (K, B, d)
    the iterates there, ``w`` (B, d) the last iterate."""

    steps: torch.Tensor
    iterates: torch.Tensor
    w: torch.Tensor


def _data(X, y) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Validated float64 ``X`` (B, n, d) and ``y`` (B, n); the flag says whether a batch was given."""
    X = as_tensor(X, "X", dtype=DEFAULT_DTYPE)
    y = as_tensor(y, "y", dtype=DEFAULT_DTYPE)
    if X.ndim not in (2, 3) or X.shape[-1] < 1 or X.shape[-2] < 1:
        raise ValueError(f"X must have shape (n, d) or (trials, n, d) with n, d >= 1, got {tuple(X.shape)}")
    if tuple(y.shape) != tuple(X.shape[:-1]):
        raise ValueError(f"y must have shape {tuple(X.shape[:-1])} (one label per point), got {tuple(y.shape)}")
    if not bool(torch.isfinite(X).all()):
        raise ValueError("X contains NaN or inf")
    if not bool(((y == 1) | (y == -1)).all()):
        raise ValueError("labels y must be -1 or +1")
    batched = X.ndim == 3
    return (X, y, True) if batched else (X[None], y[None], False)


def _p(p, allow_one: bool = True) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"p must be a number, got {type(p).__name__}")
    p = float(p)
    if math.isnan(p) or p < 1 or (p == 1 and not allow_one):
        raise ValueError(f"p must be {'>= 1' if allow_one else '> 1'} (or inf), got {p}")
    return p


def linear_margin(w, X, y, p) -> torch.Tensor:
    """The normalized margin ``min_i y_i <w, x_i> / ||w||_p`` of each classifier: ``w`` (d,) with
    ``X`` (n, d), or ``w`` (B, d) with ``X`` (B, n, d), or ``w`` (K, B, d) (e.g. the iterates of
    :func:`linear_descent`) with ``X`` (B, n, d). Its largest value is ``1 / ||w^mm_p||_p``."""
    X, y, batched = _data(X, y)
    p = _p(p)
    w = as_tensor(w, "w", dtype=DEFAULT_DTYPE)
    core = (X.shape[0], X.shape[-1]) if batched else (X.shape[-1],)
    if tuple(w.shape[-len(core):]) != core or w.ndim > len(core) + 1:
        raise ValueError(f"w must have shape ([K,] {', '.join(map(str, core))}) to match X "
                         f"{tuple(X.shape) if batched else tuple(X.shape[1:])}, got {tuple(w.shape)}")
    if not bool(torch.isfinite(w).all()):
        raise ValueError("w contains NaN or inf")
    wb = w if batched else w.unsqueeze(-2)                                    # ([K,] B, d)
    norms = torch.linalg.vector_norm(wb, ord=p, dim=-1)
    if bool((norms == 0).any()):
        raise ValueError("w = 0 has no normalized margin")
    margins = torch.einsum("bnd,...bd->...bn", X, wb) * y
    out = margins.min(-1).values / norms
    return out if batched else out[..., 0]


def linear_max_margin(X, y, p) -> LinearMaxMargin:
    """The lp max-margin classifier ``argmin ||w||_p s.t. y_i <w, x_i> >= 1`` of one data set.

    Args:
        X: points, shape (n, d); y: labels in {-1, +1}, shape (n,).
        p: 1, a number in [1.01, 100], or ``math.inf`` (the exponents :func:`norm_svm` solves).

    Raises :class:`InfeasibleError` if no homogeneous linear classifier separates the data, and
    :class:`IllConditionedError` if the solver's answer misses a constraint by more than 1e-6.
    """
    X, y, batched = _data(X, y)
    if batched:
        raise ValueError("linear_max_margin takes one data set: X (n, d), y (n,)")
    p = _p(p)
    X, y = X[0], y[0]
    tokens = torch.stack([y[:, None] * X, torch.zeros_like(X)], dim=1)           # (n, 2, d)
    try:
        res = norm_svm(tokens, torch.ones_like(X), [0] * len(y), p, diagonal=True)
    except InfeasibleError:
        raise InfeasibleError("the data are not linearly separable through the origin: no w has "
                              "y_i <w, x_i> > 0 for every i") from None
    w = torch.diagonal(res.W).clone()
    margin = float((X @ w * y).min())
    if not margin >= 1 - MARGIN_TOL:
        raise IllConditionedError(f"the solver's classifier has margin {margin:.3g} < 1 - {MARGIN_TOL:g}")
    return LinearMaxMargin(w=w, p=p, objective=float(torch.linalg.vector_norm(w, ord=p)),
                           margin=margin, unique=1 < p < math.inf)


def _dual_map(g: torch.Tensor, q: float) -> torch.Tensor:
    """The unit-lp steepest direction of ``g`` (``1/p + 1/q = 1``): ``sign(g)|g|^(q-1) / ||g||_q^(q-1)``;
    ``q = 1``: ``sign(g)``. Computed on ``g`` divided by its largest entry (no overflow)."""
    if q == 1:
        return torch.sign(g)
    scale = g.abs().amax(-1, keepdim=True).clamp_min(torch.finfo(g.dtype).tiny)
    h = g / scale
    a = h.abs() ** (q - 1)
    return torch.sign(h) * a / torch.linalg.vector_norm(h, ord=q, dim=-1, keepdim=True) ** (q - 1)


def linear_descent(X, y, method: str, p, steps: int, lr: float, *, normalized: bool = True,
                   loss: str = "exponential", log_every: int = 1) -> LinearDescent:
    """Run descent on ``L(w) = (1/n) sum_i loss(y_i <w, x_i>)`` from ``w = 0``, batched over trials.

    Methods (``q`` the dual exponent, ``1/p + 1/q = 1``):

    - ``"steepest"``: steepest descent w.r.t. ``||.||_p`` (Gunasekar et al. 2018). Normalized
      (default): ``w <- w - lr * Delta`` with ``Delta`` the unit-lp maximizer of ``<grad, Delta>``
      (p = 2: normalized GD; p = inf: sign descent). Unnormalized: the step is multiplied by the
      dual norm ``||grad||_q``, the form of their theorem.
    - ``"mirror"``: mirror descent with potential ``(1/p) ||w||_p^p`` (p-GD of Sun et al. 2022),
      ``u = sign(w)|w|^(p-1)``, ``u <- u - lr * grad`` (unnormalized, their algorithm) or
      ``u <- u - lr * grad / ||grad||_q`` (normalized, default), ``w = sign(u)|u|^(1/(p-1))``.

    Normalized steps compute the loss weights relative to the largest one (log domain), so they
    never underflow. ``X`` (n, d) or (trials, n, d); returns iterates every ``log_every`` steps.
    """
    X, y, batched = _data(X, y)
    if method not in LINEAR_METHODS:
        raise ValueError(f"method must be one of {LINEAR_METHODS}, got {method!r}")
    if loss not in _LOSSES:
        raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")
    p = _p(p, allow_one=False)
    if method == "mirror" and p == math.inf:
        raise ValueError("mirror descent needs a finite p > 1 (its potential is (1/p)||w||_p^p)")
    steps = check_count(steps, "steps", 1)
    lr = check_positive(lr, "lr")
    normalized = check_flag(normalized, "normalized")
    log_every = check_count(log_every, "log_every", 1)
    q = 1.0 if p == math.inf else p / (p - 1)
    B, n, d = X.shape
    feats = y[..., None] * X                                                  # (B, n, d)
    w = torch.zeros(B, d, dtype=DEFAULT_DTYPE)
    u = torch.zeros_like(w)
    logged, its = [0], [w.clone()]
    for k in range(1, steps + 1):
        m = torch.einsum("bnd,bd->bn", feats, w)
        logw = -m if loss == "exponential" else -torch.nn.functional.softplus(m)
        if normalized:
            logw = logw - logw.amax(-1, keepdim=True)
        g = -torch.einsum("bn,bnd->bd", logw.exp(), feats) / n             # grad (up to scale if normalized)
        if method == "steepest":
            step = _dual_map(g, q)
            if not normalized:
                step = step * torch.linalg.vector_norm(g, ord=q, dim=-1, keepdim=True)
            w = w - lr * step
        else:
            if normalized:
                g = g / torch.linalg.vector_norm(g, ord=q, dim=-1, keepdim=True).clamp_min(torch.finfo(g.dtype).tiny)
            u = u - lr * g
            w = torch.sign(u) * u.abs() ** (1 / (p - 1))
        if not bool(torch.isfinite(w).all()):
            raise ValueError(f"the iterates overflowed at step {k}; use a smaller lr or fewer steps")
        if k % log_every == 0 or k == steps:
            logged.append(k)
            its.append(w.clone())
    iterates = torch.stack(its)
    if not batched:
        iterates = iterates[:, 0]
    return LinearDescent(steps=torch.tensor(logged), iterates=iterates, w=iterates[-1])


def separable_data(n: int, d: int, trials: int = 1, margin: float = 0.1,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``trials`` data sets of ``n`` standard Gaussian points in R^d labelled by a random unit
    teacher ``w*`` (``y = sign <w*, x>``), dropping (redrawing) points with ``|<w*, x>| < margin``,
    so every set is separable through the origin. Returns ``X`` (trials, n, d) and ``y`` (trials, n)."""
    n, d, trials = check_count(n, "n", 1), check_count(d, "d", 1), check_count(trials, "trials", 1)
    margin = check_positive(margin, "margin", upper=1.0, allow_zero=True)
    check_generator(generator)
    teacher = torch.randn(trials, d, dtype=DEFAULT_DTYPE, generator=generator)
    teacher = teacher / teacher.norm(dim=-1, keepdim=True)
    X = torch.empty(trials, n, d, dtype=DEFAULT_DTYPE)
    for b in range(trials):
        kept = torch.empty(0, d, dtype=DEFAULT_DTYPE)
        while len(kept) < n:
            draw = torch.randn(4 * n, d, dtype=DEFAULT_DTYPE, generator=generator)
            kept = torch.cat([kept, draw[(draw @ teacher[b]).abs() >= margin]])
        X[b] = kept[:n]
    y = torch.sign(torch.einsum("bnd,bd->bn", X, teacher))
    return X, y
