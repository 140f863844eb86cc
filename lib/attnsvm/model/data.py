"""Problem instances of the attention model (paper A section 2; book chapter 1).

A :class:`Problem` holds ``n`` sequences of ``T`` tokens in ``R^d`` with their queries, labels and the
fixed linear head ``v``. Every array may carry leading *trials* dimensions, so that many independent
instances are one tensor program: ``X (*B, n, T, d)``, ``Y (*B, n)``, ``Z (*B, n, d)``, ``v (*B, d)``.

The token score is ``gamma_it = Y_i v^T x_it`` and the optimal token of example ``i`` is
``opt_i = argmax_t gamma_it``.

The dtype rule (one for every entry point): a :class:`Problem` takes the widest floating dtype of
``X``, ``Z`` and ``v`` (lists, numbers and integer arrays read as float64) and casts the four arrays
to it, so no input loses precision; that dtype is the precision of every computation on the
problem.
Trained parameters (an attention's, a trainable head's ``v``) are never cast: one of another
dtype or device is refused, naming both and the ``.to(...)`` that
fixes it. Fixed data handed with it (a reference direction, a cone, the tensors of an
``MLPHead`` or ``PenalizedHead``, a start given as an array) is read in the problem's dtype. The
SVM solvers (``att_svm``, ``att_svms``, ``att_svm_feasible`` and the others) take a Problem or
arrays and solve in float64. Only float64 and float32 are accepted (half precisions are refused).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .utils import (DEFAULT_DTYPE, as_array, as_tensor, check_count, check_dtype, check_flag, check_generator,
                    check_nonempty, check_shape, get_device)


@dataclass(frozen=True)
class Problem:
    """A validated training set ``(X_i, z_i, Y_i)`` with a fixed linear head ``v`` (book chapter
    1). The arrays are checked once, when the problem is made, and not copied: change them in
    place afterwards and the checks no longer vouch for them (:meth:`trial` and :meth:`select` do
    not check again). Its dtype is the widest floating dtype of ``X``, ``Z`` and ``v`` (nothing is
    cast down: a float32 problem needs all three in float32); the module docstring states the rule
    for parameters and other data.

    Attributes:
        X: tokens, shape ``(*B, n, T, d)``.
        Y: labels in ``{-1, +1}``, shape ``(*B, n)``.
        Z: queries ``z_i``, shape ``(*B, n, d)`` (self-attention: a token of ``X_i``).
        v: linear head (value vector), shape ``(*B, d)`` or ``(d,)``.
        mask: which tokens each query may attend to, boolean ``(*B, n, T)`` or ``(n, T)``; None =
            all (causal attention: position ``k`` sees ``t <= k``, see :meth:`sequence`). Masked
            tokens get logit ``-inf`` (probability exactly 0) and no SVM constraint.
    """

    X: torch.Tensor
    Y: torch.Tensor
    Z: torch.Tensor
    v: torch.Tensor
    mask: torch.Tensor | None = None

    def __post_init__(self) -> None:
        X = as_tensor(self.X, "X")
        dtype, device = check_dtype(_widest(X, self.Z, self.v), "the problem's dtype"), X.device
        X = X.to(dtype)
        Y = as_tensor(self.Y, "Y", dtype=dtype, device=device)
        Z = as_tensor(self.Z, "Z", dtype=dtype, device=device)
        v = as_tensor(self.v, "v", dtype=dtype, device=device)
        if X.ndim < 3:
            raise ValueError(f"X must have shape (..., n, T, d), got {tuple(X.shape)}")
        *batch, n, T, d = X.shape
        if T < 2:
            raise ValueError(f"each sequence needs at least 2 tokens to select from, got T={T}")
        check_nonempty(X, "X")
        check_shape(Y, "Y", (n,), "n")
        check_shape(Z, "Z", (n, d), "n, d")
        check_shape(v, "v", (d,), "d")
        for name, tensor, core in (("Y", Y, 1), ("Z", Z, 2), ("v", v, 1)):
            if tensor.ndim > core and tuple(tensor.shape[:-core]) != tuple(batch):
                raise ValueError(f"{name} has trials shape {tuple(tensor.shape[:-core])}, "
                                 f"X has {tuple(batch)}: they must match")
        if not bool(((Y == 1) | (Y == -1)).all()):
            bad = sorted({float(y) for y in Y.flatten() if y not in (-1.0, 1.0)})[:5]
            raise ValueError(f"labels Y must be -1 or +1, got values {bad}; map {{0, 1}} labels "
                             "with Y = 2 * Y - 1")
        if self.mask is not None:
            mask = self.mask
            if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
                raise TypeError(f"mask must be a boolean tensor (*B, n, T) (True = the query may "
                                f"attend to the token), got {type(mask).__name__}"
                                f"{'' if not isinstance(mask, torch.Tensor) else ' of ' + str(mask.dtype)}")
            if mask.shape[-2:] != (n, T) or (mask.ndim > 2 and tuple(mask.shape[:-2]) != tuple(batch)) \
                    or mask.ndim > 2 + len(batch):
                raise ValueError(f"mask must have shape (n, T) = {(n, T)} or (*B, n, T) with the "
                                 f"trials shape of X {tuple(batch)}, got {tuple(mask.shape)}")
            if not bool(mask.any(dim=-1).all()):
                raise ValueError("every query needs at least one token it may attend to: a row "
                                 "of mask is all False")
            object.__setattr__(self, "mask", mask.to(device))
        for name, tensor in (("X", X), ("Y", Y), ("Z", Z), ("v", v)):
            object.__setattr__(self, name, tensor)
        if not bool(torch.isfinite(self.scores).all()):
            raise ValueError("the token scores Y_i v^T x_it overflow float "
                             f"({X.dtype}): X and v are too large; rescale them")

    def __repr__(self) -> str:
        trials = f"trials={self.batch_shape}, " if self.batch_shape else ""
        mask = "" if self.mask is None else (", causal mask" if self._is_causal() else ", mask")
        return (f"Problem({trials}n={self.n}, T={self.T}, d={self.d}, {str(self.X.dtype).replace('torch.', '')}"
                f"{'' if self.X.device.type == 'cpu' else ', ' + str(self.X.device)}{mask})")

    def _is_causal(self) -> bool:
        """Whether the mask is the causal one of :meth:`sequence` (query k of a sequence sees its
        tokens t <= k)."""
        n, T = self.n, self.T
        if n % T:
            return False
        causal = torch.ones(T, T, dtype=torch.bool, device=self.mask.device).tril().repeat(n // T, 1)
        return bool((self.mask == causal).all())

    # --- sizes -------------------------------------------------------------------------------
    @property
    def batch_shape(self) -> tuple[int, ...]:
        """The trials shape ``B`` (``()`` for one instance)."""
        return tuple(self.X.shape[:-3])

    @property
    def n(self) -> int:
        """The number of examples (sequences)."""
        return self.X.shape[-3]

    @property
    def T(self) -> int:
        """The number of tokens per sequence."""
        return self.X.shape[-2]

    @property
    def d(self) -> int:
        """The token dimension."""
        return self.X.shape[-1]

    # --- scores ------------------------------------------------------------------------------
    @property
    def scores(self) -> torch.Tensor:
        """Token scores ``gamma_it = Y_i v^T x_it``, shape ``(*B, n, T)``."""
        values = torch.einsum("...ntd,...d->...nt", self.X, self.v.expand(*self.batch_shape, self.d))
        return self.Y.unsqueeze(-1) * values

    @property
    def allowed_scores(self) -> torch.Tensor:
        """The scores with ``-inf`` at masked tokens (equal to :attr:`scores` without a mask)."""
        return self.scores if self.mask is None else self.scores.masked_fill(~self.mask, -torch.inf)

    @property
    def opt(self) -> torch.Tensor:
        """Indices of the optimal tokens ``opt_i = argmax_t gamma_it`` over the tokens each query
        may attend to, shape ``(*B, n)``."""
        return self.allowed_scores.argmax(dim=-1)

    def score_gap(self) -> torch.Tensor:
        """Gap between the best and second-best score of each example; 0 means ``opt`` is not
        unique (``inf`` for a query that sees one token)."""
        top2 = self.allowed_scores.topk(2, dim=-1).values
        return top2[..., 0] - top2[..., 1]

    def mask_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """Set the logits of masked tokens to ``-inf`` (exact zeros in the softmax)."""
        return logits if self.mask is None else logits.masked_fill(~self.mask, -torch.inf)

    # --- conversions -------------------------------------------------------------------------
    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> "Problem":
        """Move every array to ``device`` (``"auto"`` allowed) and/or cast to ``dtype``."""
        dev = get_device(device) if device is not None else self.X.device
        kw = {"device": dev, "dtype": self.X.dtype if dtype is None else check_dtype(dtype)}
        return Problem(self.X.to(**kw), self.Y.to(**kw), self.Z.to(**kw), self.v.to(**kw),
                       None if self.mask is None else self.mask.to(kw["device"]))

    def trial(self, index: int) -> "Problem":
        """The instance number ``index`` of a batched problem (leading dimension)."""
        if not self.batch_shape:
            raise ValueError("this problem has no trials dimension")
        count = self.batch_shape[0]
        index = check_count(index, "index", minimum=-count)
        if index >= count:
            raise ValueError(f"index {index} is out of range for {count} trials")
        v = self.v[index] if self.v.ndim > 1 else self.v
        mask = self.mask if self.mask is None or self.mask.ndim == 2 else self.mask[index]
        return self._part(self.X[index], self.Y[index], self.Z[index], v, mask)

    def select(self, index) -> "Problem":
        """The instances ``index`` of a batched problem (leading trials dimension), e.g.
        ``problem.select(slice(10))`` for the first ten or a tensor of indices; keeps the mask."""
        if not self.batch_shape:
            raise ValueError("this problem has no trials dimension")
        if not isinstance(index, (slice, list, torch.Tensor)):
            raise TypeError(f"index must be a slice, a list or a tensor of trial indices, got "
                            f"{type(index).__name__} (use trial(b) for one instance)")
        count = self.batch_shape[0]
        try:
            picked = torch.arange(count)[index]
        except (IndexError, TypeError, RuntimeError) as error:
            raise ValueError(f"index does not select trials of a problem with {count}: {error}") from None
        if picked.ndim != 1 or not picked.numel() or (isinstance(index, (list, torch.Tensor))
                                                       and torch.as_tensor(index).ndim != 1):
            raise ValueError("index must select at least one trial along the trials dimension "
                             "(a slice, or a one-dimensional list or tensor)")
        v = self.v[picked] if self.v.ndim > 1 else self.v
        mask = self.mask if self.mask is None or self.mask.ndim == 2 else self.mask[picked]
        return self._part(self.X[picked], self.Y[picked], self.Z[picked], v, mask)

    @classmethod
    def _part(cls, X, Y, Z, v, mask) -> "Problem":
        """A Problem made of trials of a validated one (:meth:`trial`, :meth:`select`): its arrays
        are slices of checked arrays, so the checks of ``__post_init__`` are not repeated."""
        part = object.__new__(cls)
        for name, value in (("X", X), ("Y", Y), ("Z", Z), ("v", v), ("mask", mask)):
            object.__setattr__(part, name, value)
        return part

    def with_queries(self, Z: torch.Tensor) -> "Problem":
        """The same tokens, labels and head with new queries ``Z``."""
        return replace(self, Z=Z)

    @staticmethod
    def stack(problems: list["Problem"]) -> "Problem":
        """Stack same-sized instances along a new leading trials dimension."""
        if not isinstance(problems, (list, tuple)) or not all(isinstance(p, Problem) for p in problems):
            raise TypeError("stack needs a list of Problem instances")
        if not problems:
            raise ValueError("stack needs at least one problem")
        shapes = {(p.batch_shape, p.n, p.T, p.d, p.X.dtype, p.X.device) for p in problems}
        if len(shapes) > 1:
            raise ValueError("stack needs problems of one size, dtype and device; got "
                             f"{sorted(str(s[:4]) for s in shapes)}")
        d = problems[0].d
        masks = [p.mask for p in problems]
        if all(m is None for m in masks):
            mask = None
        else:
            full = torch.ones(problems[0].X.shape[:-1], dtype=torch.bool, device=problems[0].X.device)
            mask = torch.stack([full if m is None else m.expand_as(full) for m in masks])
        return Problem(torch.stack([p.X for p in problems]), torch.stack([p.Y for p in problems]),
                       torch.stack([p.Z for p in problems]),
                       torch.stack([p.v.expand(d) if p.v.ndim == 1 else p.v for p in problems]), mask)

    @staticmethod
    def self_attention(X: torch.Tensor, Y: torch.Tensor, v: torch.Tensor,
                       query_index: int = 0) -> "Problem":
        """Self-attention instance: the query of example ``i`` is its own token ``x_{i, query_index}``."""
        X = as_tensor(X, "X")
        if X.ndim < 3:
            raise ValueError(f"X must have shape (..., n, T, d), got {tuple(X.shape)}")
        query_index = check_count(query_index, "query_index", minimum=-X.shape[-2])
        if not query_index < X.shape[-2]:
            raise ValueError(f"query_index {query_index} is not a token index of X {tuple(X.shape)}")
        return Problem(X, Y, X[..., query_index, :], v)

    @staticmethod
    def sequence(X: torch.Tensor, Y: torch.Tensor, v: torch.Tensor, causal: bool = False) -> "Problem":
        """Sequence-to-sequence self-attention (paper A's sequence extension): every position
        ``k`` of ``X_i`` is a query ``x_ik`` with its own label ``Y_ik``.

        ``X (*B, n, T, d)``, ``Y (*B, n, T)``. Returns the equivalent problem with ``n * T``
        examples, example ``i * T + k`` being query ``x_ik`` over the tokens of ``X_i`` (over
        ``t <= k`` when ``causal``, through the mask). Its ERM is the mean over all ``(i, k)``,
        its Att-SVM has one constraint block per ``(i, k)``.
        """
        X = as_tensor(X, "X")
        if X.ndim < 3:
            raise ValueError(f"X must have shape (..., n, T, d), got {tuple(X.shape)}")
        causal = check_flag(causal, "causal")
        *batch, n, T, d = X.shape
        Y = as_tensor(Y, "Y", dtype=X.dtype, device=X.device)
        if tuple(Y.shape) != (*batch, n, T):
            raise ValueError(f"Y must have one label per position, shape {(*batch, n, T)}, got "
                             f"{tuple(Y.shape)}")
        tokens = X.unsqueeze(-3).expand(*batch, n, T, T, d).reshape(*batch, n * T, T, d)
        mask = None
        if causal:
            mask = torch.ones(T, T, dtype=torch.bool, device=X.device).tril().repeat(n, 1)
        return Problem(tokens, Y.reshape(*batch, n * T), X.reshape(*batch, n * T, d), v, mask)


def _widest(X: torch.Tensor, Z, v) -> torch.dtype:
    """The widest floating dtype of ``X`` (a tensor already) and of ``Z``, ``v`` as given."""
    dtype = X.dtype
    for value, name in ((Z, "Z"), (v, "v")):
        tensor = as_array(value, name)
        dtype = torch.promote_types(dtype, tensor.dtype if tensor.is_floating_point() else DEFAULT_DTYPE)
    return dtype


def check_like_problem(tensor: torch.Tensor, what: str, problem: Problem) -> None:
    """Raise ``ValueError`` unless a trained parameter ``tensor`` has the problem's dtype and
    device (the dtype rule of this module: parameters are not cast), naming both and the fix."""
    dtype, device = problem.X.dtype, problem.X.device
    if tensor.dtype != dtype or tensor.device != device:
        raise ValueError(f"{what} is {tensor.dtype} on {tensor.device} but the problem is {dtype} on "
                         f"{device} (trained parameters are not cast: the problem's dtype is the "
                         f"computation's); use problem.to(device='{tensor.device}', "
                         f"dtype={tensor.dtype}), or build {what} from tensors.to({dtype}) on "
                         f"{device}")


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def random_problem(n: int, T: int, d: int, *, trials: int | None = None,
                   generator: torch.Generator | None = None, unit_norm: bool = True,
                   dtype: torch.dtype = DEFAULT_DTYPE, device: str | torch.device = "cpu") -> Problem:
    """Gaussian instance of paper A's experiments (the reproduction report, A3/A4).

    Tokens ``x_it``, queries ``z_i`` and head ``v`` are standard Gaussian (scaled to unit norm when
    ``unit_norm``), labels are uniform random signs. With ``trials`` the arrays get a leading
    dimension of that size. Random draws always happen on the CPU, so a seed gives the same instance
    on every device.
    """
    n, T, d = check_count(n, "n", 1), check_count(T, "T", 2), check_count(d, "d", 1)
    lead = () if trials is None else (check_count(trials, "trials", 1),)
    check_generator(generator)
    unit_norm = check_flag(unit_norm, "unit_norm")
    dtype, device = check_dtype(dtype), get_device(device)
    g = generator
    X = torch.randn(*lead, n, T, d, generator=g, dtype=dtype)
    Z = torch.randn(*lead, n, d, generator=g, dtype=dtype)
    v = torch.randn(*lead, d, generator=g, dtype=dtype)
    Y = torch.randint(0, 2, (*lead, n), generator=g).to(dtype) * 2 - 1
    if unit_norm:
        X, Z, v = _unit(X), _unit(Z), _unit(v)
    return Problem(X, Y, Z, v).to(device)


def figure_problem(name: str, *, generator: torch.Generator | None = None,
                   dtype: torch.dtype = DEFAULT_DTYPE) -> Problem:
    """The 2-D instances drawn in paper A's figures (the reproduction report), drawn as the authors draw them.

    ``"A1"``: n=2, T=3; tokens ``0.3 N(0, I)`` shifted by ``(-1, 0)`` (example 1) and ``(+1, 0)``
    (example 2). ``"A2"``: n=2, T=5; ``x_11 = (1, .5)``, ``x_21 = (1, -.5)``, the other tokens
    ``0.5 N(0, I)`` shifted by ``(-1, 0)``. Both: ``Y = +1``, unit random ``v`` and ``z_i``
    (cross-attention). As in the authors' figure notebooks, everything (the draws in the order
    v, X, Z, the shifts and the normalizations) is computed in float32 and only then cast to
    ``dtype``: PyTorch's float32 and float64 normal draws of one seed are different numbers, so a
    float64 draw would be another instance (for A2, seed 3, tokens up to 1.9 apart).
    """
    check_generator(generator)
    dtype = check_dtype(dtype)
    g, f32 = generator, torch.float32
    if name == "A1":
        n, T = 2, 3
        v = _unit(torch.randn(2, generator=g, dtype=f32))
        X = 0.3 * torch.randn(n, T, 2, generator=g, dtype=f32)
        X[0] += torch.tensor([-1.0, 0.0], dtype=f32)
        X[1] += torch.tensor([1.0, 0.0], dtype=f32)
    elif name == "A2":
        n, T = 2, 5
        v = _unit(torch.randn(2, generator=g, dtype=f32))
        X = 0.5 * torch.randn(n, T, 2, generator=g, dtype=f32)
        X[0, 0] = torch.tensor([1.0, 0.5], dtype=f32)
        X[1, 0] = torch.tensor([1.0, -0.5], dtype=f32)
        X[:, 1:] += torch.tensor([-1.0, 0.0], dtype=f32)
    else:
        raise ValueError(f"unknown figure {name!r}; choose 'A1' or 'A2'")
    Z = _unit(torch.randn(n, 2, generator=g, dtype=f32))
    return Problem(X.to(dtype), torch.ones(n, dtype=dtype), Z.to(dtype), v.to(dtype))
