"""What :func:`attnsvm.train` records at its logged steps (the reproduction report: the direction of
the iterates, its correlation with a reference and how fast it still turns).

The combined parameter of each logged step is kept; its norm, correlation and turn are computed
for a block of logged steps at once (one set of tensor operations per block instead of one per
logged step: each row is reduced exactly as it would be alone, so the floats are the same).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .metrics import correlation, mean_top, unit_scale
from .utils import check_positive


@dataclass
class History:
    """What :func:`train` records, one row per logged step (rows ``steps``, then trial dims).

    ``corr`` is the correlation of the combined parameter (``W``, ``K Q^T`` or ``p``) with the
    reference (NaN without one); ``step`` the length of the update taken from that point (all
    blocks together; NaN on the last row); ``turn`` is the angle (radians) its direction turned since the
    previous logged step (NaN on the first row): a run whose direction has converged has a last
    ``turn`` near 0; ``iterates`` holds the combined parameter when recorded.

    ``frozen`` (one entry per trial, -1 where the run did not freeze) is the first step from which
    every update of the attention's parameters was exactly zero (a trained head may still move):
    the gradient underflowed (a saturated softmax in float64, the numerics appendix), the
    parameters are a fixed point of the floating-point iteration and ``turn`` is 0 because
    nothing moves, not because the direction converged. It is read from the
    update lengths of the logged steps and of the last step: with ``log_every > 1`` the freeze
    began after the previous logged step, and from a logged step whose update is 0 every later
    update is 0 too (each method's update is a function of the parameters alone; mirror descent's
    of its dual variable, which a zero gradient leaves as it is), unless a ``callback`` writes
    to the parameters. :func:`attnsvm.studies.train_until_gap` trains in chunks and keeps only each
    chunk's last turn, not ``frozen``.
    """

    steps: torch.Tensor
    loss: torch.Tensor
    norm: torch.Tensor
    corr: torch.Tensor
    max_prob: torch.Tensor
    turn: torch.Tensor
    step: torch.Tensor
    frozen: torch.Tensor
    iterates: torch.Tensor | None = None

    def unsettled(self, tol: float) -> torch.Tensor:
        """Per trial: did the direction still turn by more than ``tol`` radians per step over the
        last logging interval, or did the run freeze (``frozen >= 0``: no update at all, so no
        evidence about the direction)? True = not converged in direction by the last step; a
        frozen trial counts as unsettled (``frozen`` says which they are)."""
        tol = check_positive(tol, "tol")
        if len(self.steps) < 2:
            raise ValueError("need at least two logged steps to tell whether a direction settled")
        interval = int(self.steps[-1] - self.steps[-2])
        return ~(self.turn[-1] <= tol * interval) | (self.frozen >= 0)


def direction_angle(A: torch.Tensor, B: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """The angle between two arrays' directions, ``2 atan2(|a - b|, |a + b|)`` on unit vectors:
    accurate for tiny angles, where ``acos(corr)`` is not. NaN where either is zero."""
    a, b = _unit(A, batch_dims), _unit(B, batch_dims)
    return 2 * torch.atan2((a - b).norm(dim=-1), (a + b).norm(dim=-1))


def _unit(x: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """Each row (after ``batch_dims``) divided by its norm; NaN rows where the norm is 0."""
    x = unit_scale(x.flatten(batch_dims))
    norm = x.norm(dim=-1, keepdim=True)
    return x / torch.where(norm > 0, norm, torch.full_like(norm, float("nan")))


def _block_angles(A: torch.Tensor, B: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """:func:`direction_angle` of each row of a block (first dimension) of pairs, each row's
    ``atan2`` evaluated as it is on that row alone: the rows lie apart in memory, so no SIMD
    lane mixes two rows (a vectorized ``atan2`` may round its last bit unlike the scalar one); and
    no call spans more than ``_GRAIN`` entries, the size above which torch splits an operation
    between threads (at a place that could cut a row), so the result is the same for any number
    of threads."""
    a, b = _unit(A, batch_dims), _unit(B, batch_dims)
    rows = len(a)
    apart = torch.empty(2, rows, a[0, ..., 0].numel() + 1, dtype=a.dtype, device=a.device)
    width = apart.shape[-1] - 1
    apart[0, :, :width] = (a - b).norm(dim=-1).reshape(rows, width)
    apart[1, :, :width] = (a + b).norm(dim=-1).reshape(rows, width)
    angles = torch.empty(rows, width, dtype=a.dtype, device=a.device)
    per_call = max(1, _GRAIN // (width + 1))
    for start in range(0, rows, per_call):
        part = slice(start, start + per_call)
        angles[part] = torch.atan2(apart[0, part, :width], apart[1, part, :width])
    return 2 * angles.reshape(a.shape[:-1])


_GRAIN = 32768              # at::internal::GRAIN_SIZE


def row_norm(rows: torch.Tensor) -> torch.Tensor:
    """Euclidean norm of each row, computed on the row divided by its largest entry (no overflow
    for entries of 1e200 or 1e300)."""
    top = rows.abs().amax(dim=-1)
    safe = torch.where(top > 0, top, torch.ones_like(top))
    return safe * (rows / safe.unsqueeze(-1)).norm(dim=-1)


class Recorder:
    """The rows of a :class:`History`, filled at each logged step; the direction measurements are
    computed every ``block`` logged steps (and at the end) on the combined parameters kept."""

    def __init__(self, trials: tuple[int, ...], reference: torch.Tensor | None,
                 record_iterates: bool, block: int = 64) -> None:
        self.trials, self.batch_dims = trials, len(trials)
        self.reference, self.record_iterates, self.block = reference, record_iterates, block
        self.logged: list[int] = []
        self.rows: dict[str, list[torch.Tensor]] = {k: [] for k in ("loss", "max_prob", "step", "norm",
                                                                    "corr", "turn", "iterates")}
        self.pending: list[torch.Tensor] = []         # combined parameters not yet measured
        self.previous: torch.Tensor | None = None     # the last one measured
        self.nan_row: torch.Tensor | None = None      # NaN per trial: no turn or no reference
        self.updates: list[tuple[int, torch.Tensor]] = []    # (step, length) of the updates measured

    def log(self, step: int, combined: torch.Tensor, risk: torch.Tensor, probs: torch.Tensor) -> None:
        """Record a logged step: ``combined`` (one copy per trial), the risk and the probabilities."""
        risk = risk.detach()
        if not self.logged:
            self.nan_row = torch.full_like(risk, float("nan"))
        self.logged.append(step)
        self.rows["loss"].append(risk)
        self.rows["max_prob"].append(mean_top(probs).expand(self.trials))
        self.pending.append(combined.clone())
        if len(self.pending) == self.block:
            self._measure()

    def log_length(self, length: torch.Tensor) -> None:
        """Record the length of the update taken from the last logged step (NaN: none taken)."""
        self.rows["step"].append(length)

    def log_update(self, step: int, length: torch.Tensor) -> None:
        """Record the length of the update taken at ``step`` (a logged step, or the last one)."""
        self.updates.append((step, length))

    def _frozen(self) -> torch.Tensor:
        """Per trial, the first measured step from which every measured update is exactly 0
        (-1 where the last one is not, or where no update was taken)."""
        device = self.nan_row.device
        if not self.updates:
            return torch.full(self.trials, -1, dtype=torch.long, device=device)
        steps = torch.tensor([step for step, _ in self.updates], device=device)
        still = torch.stack([length for _, length in self.updates]) == 0
        run = still.long().flip(0).cumprod(0).sum(0)      # trailing zero updates, per trial
        first = steps[(len(steps) - run).clamp(max=len(steps) - 1)]
        return torch.where(run > 0, first, -1)

    def _measure(self) -> None:
        """Norm, correlation and turn of the pending logged steps, as a block."""
        if not self.pending:
            return
        block, rows, depth = torch.stack(self.pending), self.rows, self.batch_dims + 1
        rows["norm"].extend(row_norm(block.flatten(depth)).unbind(0))
        if self.reference is not None:      # (a reference with more leading dimensions: broadcast)
            extra = max(0, self.reference.ndim - block.ndim + 1)
            spread = block.reshape(len(block), *[1] * extra, *block.shape[1:])
            rows["corr"].extend(correlation(spread, self.reference[None], depth).unbind(0))
        else:
            rows["corr"].extend([self.nan_row] * len(block))
        before = block[:-1] if self.previous is None else torch.cat([self.previous[None], block[:-1]])
        if self.previous is None:
            rows["turn"].append(self.nan_row)
        if len(before):
            rows["turn"].extend(_block_angles(block[len(block) - len(before):], before, depth).unbind(0))
        if self.record_iterates:
            rows["iterates"].extend(self.pending)
        self.previous, self.pending = self.pending[-1], []

    def history(self) -> History:
        """The :class:`History` of the run (after its last logged step)."""
        self._measure()
        rows = self.rows
        return History(steps=torch.tensor(self.logged), loss=torch.stack(rows["loss"]),
                       norm=torch.stack(rows["norm"]), corr=torch.stack(rows["corr"]),
                       max_prob=torch.stack(rows["max_prob"]), turn=torch.stack(rows["turn"]),
                       step=torch.stack(rows["step"]), frozen=self._frozen(),
                       iterates=torch.stack(rows["iterates"]) if self.record_iterates else None)
