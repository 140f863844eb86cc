"""Digits as patch sequences, and translated digits on a noisy canvas (book chapter 10).

Small grey-level images (scikit-learn's ``load_digits``: ``8 x 8``, grey levels divided by 16) are
cut into square patches; each patch becomes a token: its pixels (row-major) followed by a one-hot
code of the patch's position in the grid (row-major). For the translated task each image is first
placed at a uniformly random offset on a larger canvas with additive Gaussian noise, so that where
the digit is varies from image to image and a classifier has to find it: the setting in which
attention's token selection is necessary. The chapter's baselines are logistic regressions whose
``C`` is chosen by cross-validation (:func:`logistic_cv_accuracy`).

The module takes the images as arrays (it does not load any data set) and does not import
scikit-learn. Every random draw comes from the ``torch.Generator`` passed in (see
:func:`attnsvm.set_seed`), so a seed fixes the canvases.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy import optimize
from scipy.special import expit

from ..model.utils import DEFAULT_DTYPE, as_array, as_tensor, check_count, check_flag, check_generator, check_positive

__all__ = ["TranslatedDigits", "digit_patches", "logistic_cv_accuracy", "patch_tokens", "place_on_canvas",
           "translated_digits"]


def _images(images, name: str = "images") -> torch.Tensor:
    """Finite float64 images of shape ``(n, h, h)`` with ``n >= 1``."""
    x = as_tensor(images, name, dtype=DEFAULT_DTYPE)
    if x.ndim != 3 or x.shape[-1] != x.shape[-2] or x.shape[0] < 1 or x.shape[-1] < 1:
        raise ValueError(f"{name} must have shape (n, h, h) with n >= 1 (square images), got "
                         f"{tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or inf")
    return x


def patch_tokens(images, patch: int, position: bool = True) -> torch.Tensor:
    """Cut square images into a grid of ``patch x patch`` patches: one token per patch.

    Args:
        images: shape ``(n, h, h)``; ``h`` must be a multiple of ``patch``.
        patch: the side of a patch, in pixels.
        position: append a one-hot code of the patch's position (row-major) to its pixels.

    Returns: tokens of shape ``(n, T, patch**2 [+ T])`` with ``T = (h / patch)**2``, float64; token
    ``t = a * (h / patch) + b`` holds the pixels ``images[:, a*patch:(a+1)*patch,
    b*patch:(b+1)*patch]`` in row-major order.
    """
    x = _images(images)
    patch = check_count(patch, "patch", 1)
    position = check_flag(position, "position")
    n, h = x.shape[0], x.shape[-1]
    if h % patch:
        raise ValueError(f"the image side {h} must be a multiple of the patch side {patch}")
    grid = h // patch
    pixels = x.reshape(n, grid, patch, grid, patch).permute(0, 1, 3, 2, 4).reshape(n, grid**2, patch**2)
    if not position:
        return pixels.contiguous()
    code = torch.eye(grid**2, dtype=x.dtype).expand(n, -1, -1)
    return torch.cat([pixels, code], dim=-1)


def place_on_canvas(images, canvas: int = 16, noise: float = 0.2,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Place each image at a uniformly random offset on a ``canvas x canvas`` noisy background.

    The offsets ``(row, column)`` of the images' top-left corners are drawn independently and
    uniformly from ``{0, ..., canvas - h}``; then i.i.d. Gaussian noise of standard deviation
    ``noise`` is added to every pixel of the canvas (the image's pixels included). Both draws come
    from ``generator`` (offsets first, then noise), so a seeded generator fixes the result.

    Returns: ``(canvases, offsets)`` of shapes ``(n, canvas, canvas)`` (float64) and ``(n, 2)``
    (int64).
    """
    x = _images(images)
    canvas = check_count(canvas, "canvas", 1)
    noise = check_positive(noise, "noise", allow_zero=True)
    check_generator(generator)
    n, h = x.shape[0], x.shape[-1]
    if canvas < h:
        raise ValueError(f"the canvas ({canvas}) must be at least as large as the images ({h})")
    offsets = torch.randint(0, canvas - h + 1, (n, 2), generator=generator)
    background = noise * torch.randn(n, canvas, canvas, generator=generator, dtype=x.dtype)
    return _place(x, offsets, background), offsets


def _place(x: torch.Tensor, offsets: torch.Tensor, background: torch.Tensor) -> torch.Tensor:
    """Add the images ``x (n, h, h)`` to ``background (n, c, c)`` at ``offsets (n, 2)`` (in place)."""
    n, h = x.shape[0], x.shape[-1]
    rows = offsets[:, 0, None, None] + torch.arange(h)[None, :, None]       # (n, h, 1)
    cols = offsets[:, 1, None, None] + torch.arange(h)[None, None, :]       # (n, 1, h)
    background[torch.arange(n)[:, None, None], rows, cols] += x.to(background)
    return background


def digit_patches(offsets, digit: int, canvas: int, patch: int, images=None) -> torch.Tensor:
    """Which patches of the canvas grid the digit occupies, boolean ``(n, T)``.

    Without ``images``: the patches that overlap the digit's ``digit x digit`` box at its offset.
    With ``images`` (shape ``(n, digit, digit)``): only the patches that hold at least one of the
    digit's pixels with a positive grey level (ink). The share of a row that is True is the chance
    that a patch drawn uniformly at random lies on the digit.
    """
    off = as_array(offsets, "offsets")
    if off.is_floating_point() or off.dtype == torch.bool:
        raise TypeError(f"offsets must hold integers, got {off.dtype}")
    digit, canvas = check_count(digit, "digit", 1), check_count(canvas, "canvas", 1)
    patch = check_count(patch, "patch", 1)
    if off.ndim != 2 or off.shape[1] != 2 or off.shape[0] < 1:
        raise ValueError(f"offsets must have shape (n, 2) with n >= 1, got {tuple(off.shape)}")
    if canvas % patch:
        raise ValueError(f"the canvas side {canvas} must be a multiple of the patch side {patch}")
    if digit > canvas:
        raise ValueError(f"the digit ({digit}) must fit the canvas ({canvas})")
    if bool((off < 0).any()) or bool((off > canvas - digit).any()):
        raise ValueError(f"offsets must lie in [0, {canvas - digit}] so that the digit fits the canvas")
    n = off.shape[0]
    if images is None:
        ink = torch.ones(n, digit, digit, dtype=DEFAULT_DTYPE)
    else:
        ink = _images(images)
        if tuple(ink.shape) != (n, digit, digit):
            raise ValueError(f"images must have shape {(n, digit, digit)} (one per offset), got "
                             f"{tuple(ink.shape)}")
    placed = _place(ink, off, torch.zeros(n, canvas, canvas, dtype=ink.dtype))
    return patch_tokens(placed > 0, patch, position=False).amax(-1) > 0


@dataclass(frozen=True)
class TranslatedDigits:
    """Translated digits as an attention problem (see :func:`translated_digits`).

    Attributes:
        canvases: the noisy canvases, ``(n, canvas, canvas)``.
        offsets: top-left corner ``(row, column)`` of each digit on its canvas, ``(n, 2)``.
        X: tokens, ``(n, T, patch**2 + T)``: patch pixels, then a one-hot position.
        Z: queries, the average token of each canvas, ``(n, patch**2 + T)``.
        Y: labels in ``{-1, +1}``, ``(n,)``.
        on_digit: patches overlapping the digit's box, boolean ``(n, T)``.
        on_ink: patches holding at least one digit pixel with positive grey level, ``(n, T)``.
    """

    canvases: torch.Tensor
    offsets: torch.Tensor
    X: torch.Tensor
    Z: torch.Tensor
    Y: torch.Tensor
    on_digit: torch.Tensor
    on_ink: torch.Tensor

    @property
    def chance(self) -> torch.Tensor:
        """Per image, the probability that a uniformly random patch overlaps the digit's box."""
        return self.on_digit.double().mean(-1)


def translated_digits(images, labels, canvas: int = 16, patch: int = 4, noise: float = 0.2,
                      generator: torch.Generator | None = None) -> TranslatedDigits:
    """Place each image at a random offset on a noisy canvas and cut the canvas into patch tokens.

    Args:
        images: grey levels in ``[0, 1]``, shape ``(n, h, h)`` (scikit-learn's digits divided by 16).
        labels: ``(n,)`` labels in ``{-1, +1}``.
        canvas, patch: the canvas side and the patch side (``canvas`` a multiple of ``patch``,
            ``canvas >= h``).
        noise: standard deviation of the Gaussian noise added to every canvas pixel (``>= 0``).
        generator: the source of the offsets and the noise (:func:`attnsvm.set_seed`).

    Returns a :class:`TranslatedDigits`; with ``T = (canvas / patch)**2`` tokens of dimension
    ``patch**2 + T`` and the average token as the query.
    """
    x = _images(images)
    if bool((x < 0).any()) or bool((x > 1).any()):
        raise ValueError("images must hold grey levels in [0, 1] (divide scikit-learn's digits by 16)")
    y = as_tensor(labels, "labels", dtype=DEFAULT_DTYPE)
    if tuple(y.shape) != (x.shape[0],):
        raise ValueError(f"labels must have shape ({x.shape[0]},), one per image, got {tuple(y.shape)}")
    if not bool(((y == 1) | (y == -1)).all()):
        raise ValueError("labels must be -1 or +1")
    canvas, patch = check_count(canvas, "canvas", 1), check_count(patch, "patch", 1)
    if canvas % patch:
        raise ValueError(f"the canvas side {canvas} must be a multiple of the patch side {patch}")
    if canvas // patch < 2:
        raise ValueError("the canvas must hold at least 2 x 2 patches (attention needs T >= 2)")
    canvases, offsets = place_on_canvas(x, canvas, noise, generator)
    X = patch_tokens(canvases, patch)
    h = x.shape[-1]
    return TranslatedDigits(canvases=canvases, offsets=offsets, X=X, Z=X.mean(1), Y=y,
                            on_digit=digit_patches(offsets, h, canvas, patch),
                            on_ink=digit_patches(offsets, h, canvas, patch, images=x))


def _indices(index, name: str, n: int) -> np.ndarray:
    """A non-empty 1-D array of integer indices into ``range(n)``."""
    idx = as_array(index, name)
    if idx.is_floating_point() or idx.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer indices, got {idx.dtype}")
    if idx.ndim != 1 or idx.shape[0] < 1:
        raise ValueError(f"{name} must be a non-empty 1-D array of indices, got shape {tuple(idx.shape)}")
    if bool((idx < 0).any()) or bool((idx >= n).any()):
        raise ValueError(f"{name} must lie in [0, {n - 1}]")
    return idx.numpy().astype(np.int64)


def _logistic_fit(X: np.ndarray, positive: np.ndarray, C: float, max_iter: int) -> np.ndarray:
    """``(w, b)`` minimizing ``mean_i log(1 + exp(-y_i (w.x_i + b))) + ||w||^2 / (2 C n)`` by
    L-BFGS-B from 0 with scikit-learn's options (``LogisticRegression``'s lbfgs solver, ``tol``
    1e-4); ``positive`` holds ``y_i = +1`` as 1.0 and ``-1`` as 0.0. Raises if it does not converge."""
    n, p = X.shape
    lam, Xt = 1.0 / (C * n), np.ascontiguousarray(X.T)

    def loss_and_gradient(w: np.ndarray) -> tuple[float, np.ndarray]:
        raw = X @ w[:p] + w[p]
        residual = (expit(raw) - positive) / n
        grad = np.empty(p + 1)
        grad[:p] = Xt @ residual + lam * w[:p]
        grad[p] = residual.sum()
        return float((np.logaddexp(0.0, raw) - positive * raw).sum() / n + 0.5 * lam * (w[:p] @ w[:p])), grad

    result = optimize.minimize(loss_and_gradient, np.zeros(p + 1), method="L-BFGS-B", jac=True,
                               options={"maxiter": max_iter, "maxls": 50, "gtol": 1e-4,
                                        "ftol": 64 * np.finfo(float).eps})
    if not result.success:
        raise ValueError(f"the logistic regression with C = {C:g} did not converge in {max_iter} "
                         f"iterations ({result.message}); raise max_iter or rescale the features")
    return result.x


def _accuracy(w: np.ndarray, X: np.ndarray, positive: np.ndarray) -> float:
    """Share of examples whose predicted class (``+1`` where ``w.x + b > 0``) is right."""
    return float(np.mean(((X @ w[:-1] + w[-1]) > 0) == (positive == 1.0)))


def logistic_cv_accuracy(features, labels, train, test, Cs, folds,
                         max_iter: int = 5000) -> tuple[float, float]:
    """Test accuracy of an L2-regularized logistic regression whose ``C`` is chosen by
    cross-validation on the training examples; returns ``(test accuracy, chosen C)``.

    The model and solver are scikit-learn's ``LogisticRegression(C=C, max_iter=max_iter)`` (with
    intercept; lbfgs from 0, ``tol`` 1e-4) and the choice of ``C`` that of ``GridSearchCV``: the
    first ``C`` of ``Cs`` with the largest mean validation accuracy over ``folds``, then a refit on
    all the training examples (Hastie, Tibshirani and Friedman, *The Elements of Statistical
    Learning*, sections 4.4 and 7.10), with the per-call overhead of scikit-learn's checks left out.

    Args:
        features: ``(n, ...)``, flattened to ``(n, p)``; finite.
        labels: ``(n,)`` labels in ``{-1, +1}``.
        train, test: integer indices of the training and test examples.
        Cs: the candidate inverse regularization strengths, positive.
        folds: ``(fit, validation)`` index pairs into the *training* examples (e.g.
            ``sklearn.model_selection.StratifiedKFold(5).split``); every fit set needs both labels.
        max_iter: L-BFGS-B iterations allowed per fit; a fit that does not converge raises.
    """
    x = as_tensor(features, "features", dtype=DEFAULT_DTYPE)
    if x.ndim < 2 or x.shape[0] < 2:
        raise ValueError(f"features must have shape (n, ...) with n >= 2, got {tuple(x.shape)}")
    X = x.reshape(x.shape[0], -1).numpy()
    if X.shape[1] < 1:
        raise ValueError("features must hold at least one feature per example")
    y = as_tensor(labels, "labels", dtype=DEFAULT_DTYPE)
    if tuple(y.shape) != (X.shape[0],):
        raise ValueError(f"labels must have shape ({X.shape[0]},), one per example, got {tuple(y.shape)}")
    if not bool(((y == 1) | (y == -1)).all()):
        raise ValueError("labels must be -1 or +1")
    positive = (y == 1).double().numpy()
    tr, te = _indices(train, "train", X.shape[0]), _indices(test, "test", X.shape[0])
    grid = as_tensor(Cs, "Cs", dtype=DEFAULT_DTYPE)
    if grid.ndim != 1 or grid.shape[0] < 1 or not bool(torch.isfinite(grid).all()) or not bool((grid > 0).all()):
        raise ValueError(f"Cs must be a non-empty 1-D array of positive finite values, got {grid.tolist()}")
    max_iter = check_count(max_iter, "max_iter", 1)
    Xtr, ptr = X[tr], positive[tr]
    if isinstance(folds, (str, bytes, dict, torch.Tensor, np.ndarray)) or not hasattr(folds, "__iter__"):
        raise TypeError(f"folds must be a sequence of (fit, validation) index pairs, got {type(folds).__name__}")
    folds = list(folds)
    if not folds:
        raise ValueError("folds must hold at least one (fit, validation) pair")
    pairs = []
    for k, fold in enumerate(folds):
        if not isinstance(fold, (list, tuple)) or len(fold) != 2:
            raise ValueError(f"fold {k} must be a (fit, validation) pair of index arrays")
        fit, val = _indices(fold[0], f"fold {k} fit", len(tr)), _indices(fold[1], f"fold {k} validation", len(tr))
        if len(np.unique(ptr[fit])) < 2:
            raise ValueError(f"fold {k}: its fit set holds one label only (use stratified folds)")
        pairs.append((fit, val))
    if len(np.unique(ptr)) < 2:
        raise ValueError("the training examples hold one label only")
    scores = np.array([[_accuracy(_logistic_fit(Xtr[fit], ptr[fit], float(C), max_iter), Xtr[val], ptr[val])
                        for fit, val in pairs] for C in grid.tolist()])
    best = float(grid[int(np.argmax(np.average(scores, axis=1)))])
    return _accuracy(_logistic_fit(Xtr, ptr, best, max_iter), X[te], positive[te]), best
