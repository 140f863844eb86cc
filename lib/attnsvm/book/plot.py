"""One figure style for the whole book, and the recurring plots.

Opaque white backgrounds (readable in dark mode), the Okabe-Ito colour-blind-safe palette, and
helpers for 2-D token geometry, SVM rays and curves over iterations. This is the only module that
imports matplotlib; the rest of the library never plots.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch

from ..model.data import Problem

PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]


def use_style() -> None:
    """Apply the book's figure style (call once per notebook). Fonts are sized for a figure shown
    shrunk to the text column (a wide figure is displayed at about two thirds of its width)."""
    mpl.rcParams.update({
        "figure.facecolor": "white", "axes.facecolor": "white", "savefig.facecolor": "white",
        "figure.dpi": 110, "font.size": 11.5, "axes.titlesize": 12, "axes.labelsize": 11.5,
        "xtick.labelsize": 10.5, "ytick.labelsize": 10.5, "legend.fontsize": 10.5, "axes.grid": True,
        "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
        "legend.frameon": False, "lines.linewidth": 1.8,
        "axes.prop_cycle": mpl.cycler(color=PALETTE),
    })


def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def tokens_2d(ax, X, selected=None, labels: Sequence[str] | None = None, markers: str = "osD^v") -> None:
    """Scatter the tokens of every example (one marker per example); ring the selected ones."""
    X = _np(X)
    for i, tokens in enumerate(X):
        colour = PALETTE[i % len(PALETTE)]
        label = labels[i] if labels is not None else f"$X_{{{i + 1}}}$"
        ax.scatter(tokens[:, 0], tokens[:, 1], marker=markers[i % len(markers)], color=colour,
                   s=36, label=label, zorder=3)
        if selected is not None:
            star = tokens[int(_np(selected)[i])]
            ax.scatter(*star, s=200, facecolors="none", edgecolors=colour, linewidths=1.8, zorder=4)
    ax.set_aspect("equal")


def ray(ax, direction, length: float = 3.0, **kwargs) -> None:
    """Draw the ray ``{s * direction / ||direction||: 0 <= s <= length}`` from the origin."""
    u = _np(direction).astype(float)
    u = length * u / np.linalg.norm(u)
    ax.plot([0, u[0]], [0, u[1]], **kwargs)


def separating_line(ax, normal, offset: float, extent: float = 3.0, **kwargs) -> None:
    """Draw the line ``{x : normal^T x = offset}`` across the square ``[-extent, extent]^2``."""
    a = _np(normal).astype(float)
    t = np.linspace(-extent, extent, 2)
    if abs(a[1]) > abs(a[0]):
        ax.plot(t, (offset - a[0] * t) / a[1], **kwargs)
    else:
        ax.plot((offset - a[1] * t) / a[0], t, **kwargs)


def curves(ax, steps, values, label: str | None = None, band: bool | str | None = True,
           center: str | None = None, **kwargs) -> None:
    """A curve over trials (the second dimension of ``values``), with a band around it.

    ``band`` picks the band and, unless ``center`` says otherwise, the line:

    - ``True`` or ``"minmax"`` (the default): the mean over trials, with a band from the smallest
      to the largest trial (a range, not a confidence interval);
    - ``"iqr"``: the median over trials, with a band from the 25th to the 75th percentile (the
      interquartile range, which half of the trials lie in at each step);
    - ``False`` or ``None``: the mean, without a band.

    ``center`` (``"mean"`` or ``"median"``) overrides the line. NaN entries are ignored, and steps
    where every trial is NaN are dropped (e.g. step 0, where ``W = 0`` has no direction). The
    remaining keyword arguments go to ``ax.plot``.
    """
    if band is True:
        band = "minmax"
    if band not in ("minmax", "iqr", False, None):
        raise ValueError(f"band must be 'minmax', 'iqr', True, False or None, got {band!r}")
    if center is None:
        center = "median" if band == "iqr" else "mean"
    if center not in ("mean", "median"):
        raise ValueError(f"center must be 'mean' or 'median', got {center!r}")
    steps, values = _np(steps), _np(values)
    values = values.reshape(len(values), -1)
    keep = ~np.isnan(values).all(axis=1)            # e.g. step 0, where W = 0 has no direction
    steps, values = steps[keep], values[keep]
    line_values = np.nanmedian(values, axis=1) if center == "median" else np.nanmean(values, axis=1)
    line, = ax.plot(steps, line_values, label=label, **kwargs)
    if band and values.shape[1] > 1:
        if band == "iqr":
            low, high = np.nanpercentile(values, [25, 75], axis=1)
        else:
            low, high = np.nanmin(values, axis=1), np.nanmax(values, axis=1)
        ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.2, linewidth=0)


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.0, height: float = 3.2, **kwargs):
    """``plt.subplots`` with the book's panel size."""
    use_style()
    return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                        constrained_layout=True, **kwargs)


def draw_selection(ax, problem, alpha, W, support, title: str, examples: Sequence[int] | None = None,
                   scores: bool = False) -> None:
    """Att-SVM in the token plane (d = 2): the tokens (selected ones ringed), ``u_i = W z_i`` as
    arrows, the tight-margin line ``(x - x_{i alpha_i})^T u_i = -1`` of each example (dashed) and
    the support tokens (black squares).

    ``problem`` is one 2-D instance, ``alpha`` ``(n,)`` the selection, ``W`` ``(2, 2)`` and
    ``support`` ``(n, T)`` (e.g. an ``SVMResult``'s ``W`` and ``support``); ``examples`` which
    examples to draw (default all); ``scores`` writes ``gamma_it`` next to each token and stars the
    optimal token where it is not the selected one.
    """
    if not isinstance(problem, Problem) or problem.batch_shape or problem.d != 2:
        raise ValueError("draw_selection draws one instance with d = 2 (an attnsvm Problem)")
    alpha, W, support = torch.as_tensor(alpha), torch.as_tensor(W), torch.as_tensor(support)
    if tuple(alpha.shape) != (problem.n,) or tuple(W.shape) != (2, 2) \
            or tuple(support.shape) != (problem.n, problem.T) or support.dtype != torch.bool:
        raise ValueError(f"alpha, W and support must have shapes ({problem.n},), (2, 2) and boolean "
                         f"({problem.n}, {problem.T}), got {tuple(alpha.shape)}, {tuple(W.shape)} "
                         f"and {support.dtype} {tuple(support.shape)}")
    examples = list(range(problem.n)) if examples is None else list(examples)
    if not examples or any(not 0 <= i < problem.n for i in examples):
        raise ValueError(f"examples must be indices in [0, {problem.n - 1}], got {examples}")
    P = problem
    tokens_2d(ax, P.X[examples], alpha[examples], labels=[f"example {i + 1}" for i in examples])
    ax.scatter([], [], s=120, facecolors="none", edgecolors="0.3", linewidths=1.8,
               label="selected token (ringed)")
    for k, i in enumerate(examples):
        colour = PALETTE[k]
        u = W @ P.Z[i]
        x_sel = P.X[i, alpha[i]]
        separating_line(ax, u, float(u @ x_sel) - 1, extent=4, color=colour, ls="--", lw=1.2,
                        label=f"tight margin, example {i + 1}")
        tip = 0.9 * u / u.norm()
        ax.annotate("", xy=tuple(tip.tolist()), xytext=(0, 0),
                    arrowprops=dict(arrowstyle="-|>", color=colour, lw=1.8))
        ax.annotate(f"$u_{i + 1}$", xy=tuple(tip.tolist()), xytext=(-18, 7 if k == 0 else -16),
                    textcoords="offset points", color=colour)
        sup = P.X[i][support[i]]
        ax.scatter(sup[:, 0], sup[:, 1], marker="s", s=110, facecolors="none", edgecolors="k",
                   linewidths=1.2, zorder=5, label="support token" if k == 0 else None)
        if scores:
            for t in range(P.T):
                ax.annotate(f"$\\gamma$={float(P.scores[i, t]):+.2f}", xy=tuple(P.X[i, t].tolist()),
                            xytext=(8, -4), textcoords="offset points", fontsize=8)
            if int(P.opt[i]) != int(alpha[i]):
                ax.scatter(*P.X[i, P.opt[i]].tolist(), marker="*", s=160, color="k", zorder=6,
                           label="optimal token (not selected)")
    pts = P.X[examples].reshape(-1, 2)
    lo, hi = pts.min(0).values - 0.4, pts.max(0).values + 0.4
    lo, hi = torch.minimum(lo, torch.tensor(-1.0)), torch.maximum(hi, torch.tensor(1.0))
    ax.set(xlim=(float(lo[0]), float(hi[0]) + 0.3 * scores), ylim=(float(lo[1]), float(hi[1])),
           xlabel="first coordinate", ylabel="second coordinate", title=title)
