"""Experiment A4 of paper A: global, locally optimal or neither, as the embedding dimension grows
(the reproduction report, row A4; section 3, "Large d / overparameterization"; book chapter 5).

The paper's bar chart gives, for ``d`` in :data:`A4_D` and a fixed ``(n, T)`` not available to us,
the share of gradient-descent runs that reached the global direction, a locally optimal one
(global included), or neither (:data:`A4_PAPER`, read off the authors' slides, +-1 point). A4 has
no public code; this module runs the authors' common protocol (unit-norm Gaussian data, random
labels, logistic loss, normalized GD with step 0.1 for 2000 steps from ``W = 0``) on seeded
instances, classifies every run with :func:`run_outcomes`, counts the outcomes and compares the
counts with the paper's bars. Everything is seeded: the same arguments give the same numbers.

The runs are one batched program on the logits (:func:`attnsvm.studies._a4_path.ngd_logit_path`): the normalized step on ``W``
moves the logits by a kernel of the data, so no ``d x d`` matrix is formed, runs of several ``d``
share one program (zero-padded coordinates change no inner product), and a run can record its
probabilities at several step budgets (:func:`a4_budgets`) for the cost of the longest.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

from ._a4_path import ngd_logit_path
from ..model.data import Problem, random_problem
from ..model.models import WAttention
from ..book.report import proportion_interval
from ..maxmargin.selections import OUTCOMES, check_saturation, run_outcomes
from ..maxmargin.svm import att_svm_feasible
from ..maxmargin._svm_core import IllConditionedError
from ..model.utils import DEFAULT_DTYPE, as_tensor, check_count, check_positive, check_seed, set_seed

A4_D = (2, 3, 4, 5, 10, 20)
"""The embedding dimensions of the paper's A4 bar chart."""

A4_PAPER = {"global": (17, 45, 67, 79, 97, 100),
            "local incl. global": (36, 82, 98, 100, 100, 100),
            "neither": (63, 17, 2, 0, 0, 0)}
"""The paper's A4 bars in % for ``d`` in :data:`A4_D` (authors' slides, read off to +-1 point)."""

COUNT_KEYS = OUTCOMES + ("N", "local incl. global", "neither")


def seeded_instances(n: int, T: int, d: int, seed: int, stop: int, *, start: int = 0,
                     drawn: int | None = None, unit_norm: bool = True) -> tuple[Problem, torch.Generator]:
    """Instances ``start .. stop - 1`` of ``drawn`` (default ``stop``) random instances drawn with
    :func:`random_problem` from ``set_seed(seed)``, and the generator after the whole draw.

    Drawing ``drawn`` instances and keeping a slice is what lets a quick run use the first
    instances of the paper-scale draw, and a larger run add instances without changing the first.
    """
    n, T, d = check_count(n, "n", 1), check_count(T, "T", 2), check_count(d, "d", 1)
    seed = check_seed(seed)
    start, stop = check_count(start, "start"), check_count(stop, "stop", 1)
    drawn = stop if drawn is None else check_count(drawn, "drawn", 1)
    if not start < stop <= drawn:
        raise ValueError(f"need 0 <= start < stop <= drawn, got start={start}, stop={stop}, drawn={drawn}")
    g = set_seed(seed)
    problem = random_problem(n, T, d, trials=drawn, generator=g, unit_norm=unit_norm)
    return problem.select(slice(start, stop)), g


def _budgets(budgets) -> tuple[int, ...]:
    if isinstance(budgets, (str, bytes)) or not isinstance(budgets, (list, tuple)) or not budgets:
        raise TypeError(f"budgets must be a non-empty list of step counts, got {budgets!r}")
    return tuple(sorted({check_count(b, "budget", 1) for b in budgets}))


def ngd_outcomes(problem: Problem, W0: torch.Tensor | None = None, *, steps: int = 2000,
                 lr: float = 0.1, saturation: float | None = 0.99) -> tuple[torch.Tensor, list[str]]:
    """Normalized GD (logistic loss, the authors' common protocol) from ``W0`` (default 0) on every
    instance of a batched ``problem``; returns the final softmax probabilities ``(B, n, T)`` and
    the kind of each run (an entry of :data:`OUTCOMES`, see :func:`run_outcomes`)."""
    if not isinstance(problem, Problem) or len(problem.batch_shape) != 1:
        raise ValueError("ngd_outcomes needs an attnsvm Problem with one trials dimension (B, n, T, d)")
    trials = problem.batch_shape[0]
    check_saturation(saturation)
    if W0 is None:
        W0 = torch.zeros(trials, problem.d, problem.d, dtype=problem.X.dtype)
    W0 = as_tensor(W0, "W0", dtype=problem.X.dtype)
    if tuple(W0.shape) != (trials, problem.d, problem.d):
        raise ValueError(f"W0 must have shape {(trials, problem.d, problem.d)} (trials, d, d), got {tuple(W0.shape)}")
    steps = check_count(steps, "steps", 1)
    lr = check_positive(lr, "lr")
    logits = WAttention(W0).logits(problem)
    probabilities = ngd_logit_path(problem.X, problem.Z, problem.Y, problem.scores * problem.Y.unsqueeze(-1),
                              logits, (steps,), lr)[steps]
    return probabilities, run_outcomes(problem, probabilities, saturation=saturation)[1]


def outcome_counts(kinds: Sequence[str]) -> dict[str, int]:
    """How many runs ended in each of :data:`OUTCOMES`, with ``"N"`` (all runs), ``"local incl.
    global"`` (global + locally optimal) and ``"neither"`` (not locally optimal + ill-conditioned +
    unsaturated): the three bars of A4."""
    if isinstance(kinds, str) or not isinstance(kinds, (list, tuple)):
        raise TypeError(f"kinds must be a list of outcomes (from run_outcomes), got {type(kinds).__name__}")
    unknown = sorted({str(k) for k in kinds if not isinstance(k, str) or k not in OUTCOMES})
    if unknown:
        raise ValueError(f"unknown outcomes {unknown}; each must be one of {OUTCOMES}")
    if not kinds:
        raise ValueError("kinds is empty: no runs to count")
    c = Counter(kinds)
    counts = {k: c[k] for k in OUTCOMES}
    counts["N"] = len(kinds)
    counts["local incl. global"] = counts["global"] + counts["locally optimal"]
    counts["neither"] = counts["not locally optimal"] + counts["ill-conditioned"] + counts["unsaturated"]
    return counts


def outcomes_by_threshold(problem: Problem, probabilities: torch.Tensor,
                          levels: Sequence[float | None] = (None, 0.9, 0.99, 0.999)) -> dict:
    """:func:`outcome_counts` of the same runs under several saturation thresholds (``None`` = the
    argmax rule): the band of A4's bars over the threshold that decides when a run has "chosen"
    (book chapter 5b, Checks 5b.5 and 5b.6). Returns ``{level: counts}``, equal to counting
    :func:`run_outcomes` at each level; the selections are classified once (under the argmax rule),
    since a threshold only decides which runs count as unsaturated."""
    if isinstance(levels, (str, bytes)) or not isinstance(levels, (list, tuple)) or not levels:
        raise TypeError("levels must be a non-empty list of thresholds in (0.5, 1) or None (argmax)")
    for level in levels:
        check_saturation(level)
    _, argmax_kinds = run_outcomes(problem, probabilities, saturation=None)
    least_top = torch.as_tensor(probabilities).detach().max(-1).values.min(-1).values   # least saturated example
    return {level: outcome_counts([kind if level is None or bool(top >= level) else "unsaturated"
                                   for kind, top in zip(argmax_kinds, least_top)]) for level in levels}


def a4_seed(n: int, T: int, d: int) -> int:
    """The seed of the A4 draw of shape ``(n, T, d)``: one seed per cell, so cells never share
    instances and adding a shape or a ``d`` changes no other cell."""
    n, T, d = check_count(n, "n", 1), check_count(T, "T", 2), check_count(d, "d", 1)
    if max(n, T, d) >= 100:
        raise ValueError(f"the A4 seed encodes n, T and d below 100 each, got {(n, T, d)}")
    return 10 ** 6 + 10 ** 4 * n + 10 ** 2 * T + d


def _a4_draw(n: int, T: int, d: int, stop: int, start: int, init: str, drawn: int
             ) -> tuple[Problem, torch.Tensor]:
    """Instances ``start .. stop - 1`` of the A4 draw of ``(n, T, d)`` and their starts ``W(0)``."""
    problem, g = seeded_instances(n, T, d, a4_seed(n, T, d), stop, start=start, drawn=drawn)
    W0 = torch.zeros(stop - start, d, d, dtype=DEFAULT_DTYPE)
    if init == "random":
        W0 = 0.1 * torch.randn(drawn, d, d, generator=g, dtype=DEFAULT_DTYPE)[start:stop]
    return problem, W0


def _a4_path(n: int, T: int, ds: Sequence[int], stop: int, start: int, init: str, drawn: int,
             budgets: Sequence[int], lr: float) -> tuple[dict, dict]:
    """The checked body of :func:`a4_budgets`; also returns the instances ``{d: problem}``."""
    if init not in ("zero", "random"):
        raise ValueError(f"init must be 'zero' or 'random', got {init!r}")
    D = max(ds)
    problems, parts = {}, []
    for d in ds:
        problems[d], W0 = _a4_draw(n, T, d, stop, start, init, drawn)
        problem, pad = problems[d], (0, D - d)
        parts.append((torch.nn.functional.pad(problem.X, pad), torch.nn.functional.pad(problem.Z, pad),
                      problem.Y, problem.scores * problem.Y.unsqueeze(-1), WAttention(W0).logits(problem)))
    X, Z, Y, values, logits = (torch.cat(t) for t in zip(*parts))
    path = ngd_logit_path(X, Z, Y, values, logits, budgets, lr)
    size = stop - start
    return {d: {b: p[k * size:(k + 1) * size] for b, p in path.items()} for k, d in enumerate(ds)}, problems


def a4_budgets(n: int, T: int, ds: Sequence[int], stop: int, *, start: int = 0, init: str = "zero",
               drawn: int = 500, budgets: Sequence[int] = (2000,), lr: float = 0.1) -> dict:
    """The runs of :func:`a4_runs` for every ``d`` of ``ds`` as one batched program (the tokens and
    queries of the smaller ``d`` zero-padded, which changes no inner product), recording each run's
    softmax probabilities after every step count in ``budgets`` (the runs of the longest budget
    pass through the shorter ones). Returns ``{d: {budget: probabilities (stop - start, n, T)}}``;
    classify them with :func:`run_outcomes` or :func:`outcomes_by_threshold`."""
    if isinstance(ds, (str, bytes)) or not isinstance(ds, (list, tuple)) or not ds:
        raise TypeError("ds must be a non-empty list of embedding dimensions")
    ds = tuple(dict.fromkeys(check_count(d, "d", 1) for d in ds))
    budgets = _budgets(budgets)
    lr = check_positive(lr, "lr")
    return _a4_path(n, T, ds, stop, start, init, drawn, budgets, lr)[0]


def a4_runs(n: int, T: int, d: int, stop: int, *, start: int = 0, init: str = "zero",
            drawn: int = 500, steps: int = 2000, lr: float = 0.1,
            saturation: float | None = 0.99) -> tuple[torch.Tensor, list[str]]:
    """One cell of A4: :func:`ngd_outcomes` on instances ``start .. stop - 1`` of the seeded draw of
    ``drawn`` instances of ``(n, T, d)`` (:func:`a4_seed`). ``init="zero"`` starts at ``W = 0``;
    ``"random"`` at i.i.d. N(0, 0.1^2) entries drawn after the instances (``drawn`` of them, the
    same start for the same instance whatever the slice)."""
    check_saturation(saturation)
    steps = check_count(steps, "steps", 1)
    d = check_count(d, "d", 1)
    path, problems = _a4_path(n, T, (d,), stop, start, init, drawn, (steps,), check_positive(lr, "lr"))
    probabilities = path[d][steps]
    return probabilities, run_outcomes(problems[d], probabilities, saturation=saturation)[1]


def a4_grid(shapes: Sequence[tuple[int, int]], count: int, *, ds: Sequence[int] = A4_D,
            init: str = "zero", drawn: int = 500) -> dict:
    """:func:`a4_runs` on the first ``count`` instances of every shape ``(n, T)`` and every ``d``:
    ``{(n, T): {d: (probabilities, kinds)}}``. Score each shape with :func:`a4_compare`."""
    if isinstance(shapes, (str, bytes)) or not isinstance(shapes, (list, tuple)) or not shapes or not all(
            isinstance(s, (list, tuple)) and len(s) == 2 for s in shapes):
        raise TypeError("shapes must be a non-empty list of (n, T) pairs")
    if isinstance(ds, (str, bytes)) or not isinstance(ds, (list, tuple)) or not ds:
        raise TypeError("ds must be a non-empty list of embedding dimensions")
    return {(n, T): {d: a4_runs(n, T, d, count, init=init, drawn=drawn) for d in ds} for n, T in shapes}


@dataclass
class A4Comparison:
    """Our shares against the paper's A4 bars (:func:`a4_compare`).

    ``diffs[(d, key)]``: ours minus the paper, in percentage points; ``score``: their mean absolute
    value; ``outside``: the ``(key, d)`` whose paper bar lies outside our 95 % Wilson interval
    widened by the read-off error; ``percent[(d, key)]``: our share in %."""
    diffs: dict
    score: float
    outside: list
    percent: dict


def a4_compare(counts: Mapping[int, Mapping[str, int]],
               keys: Sequence[str] = ("global", "local incl. global"), readoff: float = 1.0) -> A4Comparison:
    """Compare :func:`outcome_counts` per ``d`` (``{d: counts}``, each ``d`` in :data:`A4_D`; a
    subset is allowed, e.g. to fit on small ``d`` and predict the others) with the paper's bars
    ``keys`` (of :data:`A4_PAPER`). The score is the mean absolute difference in points."""
    if not isinstance(counts, Mapping) or not counts:
        raise TypeError("counts must be a non-empty mapping {d: outcome_counts(...)}")
    if isinstance(keys, (str, bytes)) or not isinstance(keys, (list, tuple)) or not keys:
        raise TypeError(f"keys must be a non-empty list of bars among {tuple(A4_PAPER)}")
    bad = [k for k in keys if k not in A4_PAPER]
    if bad:
        raise ValueError(f"unknown bars {bad}; the paper's are {tuple(A4_PAPER)}")
    readoff = check_positive(readoff, "readoff", allow_zero=True)
    diffs, percent, outside = {}, {}, []
    for key in keys:
        for d, c in counts.items():
            if d not in A4_D:
                raise ValueError(f"d = {d!r} is not one of the paper's {A4_D}")
            if not isinstance(c, Mapping) or "N" not in c or key not in c:
                raise ValueError(f"counts[{d}] must come from outcome_counts (with 'N' and {key!r})")
            paper = A4_PAPER[key][A4_D.index(d)]
            percent[d, key] = 100 * c[key] / c["N"]
            diffs[d, key] = percent[d, key] - paper
            lo, hi = proportion_interval(c[key], c["N"])
            if not 100 * lo - readoff <= paper <= 100 * hi + readoff:
                outside.append((key, d))
    score = np.mean([abs(v) for v in diffs.values()])
    return A4Comparison(diffs, float(score), outside, percent)
