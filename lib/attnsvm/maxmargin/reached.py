"""Which max-margin problem a trained attention reached (book chapters 2-4).

A run selects, in each example, the token its softmax puts the most mass on. Paper A's results say
which SVM its direction then follows: Att-SVM of that selection for W (paper A, regularization
path of W for the optimal tokens; local convergence of GD for W for a locally optimal selection,
from a cone around its direction), and the nuclear-norm Att-SVM* for (K, Q) (paper A,
regularization path of (K, Q); for (K, Q) gradient descent no theorem, it is observed to track
Att-SVM*). :func:`reached_svm` reads the selection, its kind (:data:`attnsvm.maxmargin.KINDS`),
that SVM and the correlation of the run's direction with it, and says whether the run has
saturated (chosen its tokens) at all. It reports what a run reached; whether a theorem covers the
run depends on its hypotheses (start, step size), which this function cannot see.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from ..model.data import Problem
from ..model.metrics import corr
from ..model.models import Attention, KQAttention, WAttention
from .selections import _check_norm, check_saturation, selection_kind
from .svm import SVMResult


@dataclass(frozen=True)
class Reached:
    """What one run reached (:func:`reached_svm`).

    Attributes:
        selection: the top token of each example, ``(n,)``.
        kind: the selection's kind, an entry of :data:`attnsvm.maxmargin.KINDS` (``"global"`` when
            it is ``problem.opt``).
        svm: the selection's SVM (Att-SVM for ``norm="fro"``, Att-SVM* for ``"nuc"``); None when
            it is infeasible or float64 cannot decide (``kind`` says which).
        corr: the correlation of the run's combined parameter (``W`` or ``K Q^T``) with
            ``svm.W``; NaN without an SVM.
        top_probability: the smallest, over the examples, of the probability on the top token.
        saturated: ``top_probability >= saturation``: the run has chosen its tokens. An
            unsaturated run's selection is where it stands, not where it converges.
    """

    selection: torch.Tensor
    kind: str
    svm: SVMResult | None
    corr: float
    top_probability: float
    saturated: bool

    def __repr__(self) -> str:
        state = "saturated" if self.saturated else "not saturated"
        return (f"Reached(selection={self.selection.tolist()}, kind={self.kind!r}, "
                f"corr={self.corr:.6f}, top probability {self.top_probability:.4f}, {state})")


def reached_svm(attention: Attention, problem: Problem, saturation: float = 0.99,
                norm: str | None = None) -> Reached | list[Reached]:
    """The selection a trained ``attention`` makes on ``problem``, its kind, its SVM and how close
    the run's direction is to it.

    Args:
        attention: a :class:`WAttention` or :class:`KQAttention`, unbatched or with one trials
            dimension (then the problem has the same trials, or none).
        problem: the training set.
        saturation: the top-token probability every example needs for the run to count as
            saturated (``Reached.saturated``); in (0.5, 1).
        norm: the SVM to compare with: ``"fro"`` (Att-SVM) or ``"nuc"`` (Att-SVM*); default
            ``"fro"`` for W and ``"nuc"`` for (K, Q), as paper A's theorems pair them.

    Returns one :class:`Reached`, or a list of them (one per trial) for a batched run. Warns
    (:class:`ReachedWarning`) where the comparison is outside the results' hypotheses: an example
    whose optimal token is tied (paper A assumes it unique; ``"global"`` then names the argmax's
    tie-break), or a (K, Q) run of width ``m`` below the rank of its Att-SVM* solution (``K Q^T``
    cannot reach that direction).
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if not isinstance(attention, (WAttention, KQAttention)):
        raise TypeError("reached_svm reads a WAttention or a KQAttention, got "
                        f"{type(attention).__name__} (for prompt attention use p_svm)")
    if norm is None:
        norm = "nuc" if isinstance(attention, KQAttention) else "fro"
    _check_norm(norm)
    if check_saturation(saturation) is None:
        raise ValueError("saturation must be a probability in (0.5, 1), got None")
    combined = attention.combined()
    trials = tuple(combined.shape[:-2])
    if len(trials) > 1 or len(problem.batch_shape) > 1:
        raise ValueError("reached_svm takes at most one trials dimension, got the attention's "
                         f"{trials} and the problem's {problem.batch_shape}")
    if problem.batch_shape and problem.batch_shape != trials:
        raise ValueError(f"the problem has trials {problem.batch_shape} but the attention "
                         f"{trials or 'none'}: give both the same trials, or the problem none")
    if problem.X.dtype != combined.dtype or problem.X.device != combined.device:
        raise ValueError(f"the attention is {combined.dtype} on {combined.device} but the problem "
                         f"is {problem.X.dtype} on {problem.X.device}: move one with .to(...)")
    probabilities = attention.probabilities(problem)
    if not bool(torch.isfinite(probabilities).all()):
        raise ValueError("the attention's probabilities contain NaN: its parameters are not finite")
    width = attention.K.shape[-1] if isinstance(attention, KQAttention) else None
    if not trials:
        return _reached(problem, combined, probabilities, saturation, norm, width)
    return [_reached(problem.trial(b) if problem.batch_shape else problem, combined[b],
                     probabilities[b], saturation, norm, width) for b in range(trials[0])]


class ReachedWarning(UserWarning):
    """:func:`reached_svm` compared a run outside the hypotheses of the result it reads."""


TIE_TOL = 1e-9
"""Relative score gap below which two optimal tokens count as tied (:func:`reached_svm`)."""


def _reached(problem: Problem, combined: torch.Tensor, probabilities: torch.Tensor,
             saturation: float, norm: str, width: int | None) -> Reached:
    """:class:`Reached` of one instance from its run's combined parameter and probabilities."""
    top, selection = probabilities.max(dim=-1)
    selection = selection.cpu()
    scores = problem.allowed_scores.detach().cpu().double()
    best = scores.topk(2, dim=-1).values
    tied = (best[..., 0] - best[..., 1]) <= TIE_TOL * best[..., 0].abs().clamp(min=1e-300)
    if bool(tied.any()):
        warnings.warn(f"example(s) {tied.nonzero().flatten().tolist()[:5]} have tied optimal tokens "
                      "(score gap at rounding level): paper A's results assume a unique optimal "
                      "token, and the kind 'global' names the argmax's tie-break", ReachedWarning,
                      stacklevel=3)
    kind, svm = selection_kind(problem, selection, norm)
    if width is not None and svm is not None and svm.rank > width:
        warnings.warn(f"the Att-SVM* solution has rank {svm.rank} but K Q^T has width m = {width}: "
                      "the run cannot reach that direction (paper A's (K, Q) results take m at "
                      "least that rank)", ReachedWarning, stacklevel=3)
    if svm is None:
        similarity = float("nan")
    else:
        similarity = float(corr(combined.cpu().double(), torch.as_tensor(svm.W, dtype=torch.float64)))
    least = float(top.min())
    return Reached(selection=selection, kind=kind, svm=svm, corr=similarity, top_probability=least,
                   saturated=least >= saturation)
