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

PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]


def use_style() -> None:
    """Apply the book's figure style (call once per notebook)."""
    mpl.rcParams.update({
        "figure.facecolor": "white", "axes.facecolor": "white", "savefig.facecolor": "white",
        "figure.dpi": 110, "font.size": 10, "axes.titlesize": 11, "axes.grid": True,
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


def curves(ax, steps, values, label: str | None = None, band: bool = True, **kwargs) -> None:
    """Mean curve over trials (second dimension), with a min-max band when ``band``."""
    steps, values = _np(steps), _np(values)
    values = values.reshape(len(values), -1)
    keep = ~np.isnan(values).all(axis=1)            # e.g. step 0, where W = 0 has no direction
    steps, values = steps[keep], values[keep]
    line, = ax.plot(steps, np.nanmean(values, axis=1), label=label, **kwargs)
    if band and values.shape[1] > 1:
        ax.fill_between(steps, np.nanmin(values, axis=1), np.nanmax(values, axis=1),
                        color=line.get_color(), alpha=0.2, linewidth=0)


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.0, height: float = 3.2, **kwargs):
    """``plt.subplots`` with the book's panel size."""
    use_style()
    return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                        constrained_layout=True, **kwargs)
