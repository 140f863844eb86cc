"""Classifying selections: which token choices ``alpha`` admit a max-margin direction, and of
what kind (paper A, support indices and locally optimal directions; book page 'What is proved where').

For every selection ``alpha`` (one token per example) Att-SVM(alpha) is either infeasible, or its
solution ``W_mm(alpha)`` is *global* (``alpha = opt``), *locally optimal* (every support token of
every example scores below the selected token) or *not locally optimal*; "ill-conditioned" marks a selection whose margins are too small against
the data for float64 to decide (see ``svm.IllConditionedError``).
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from dataclasses import replace

import numpy as np
import torch

from ..model.data import Problem
from ..model.metrics import selected_tokens
from .svm import SVMResult, att_svm
from ._svm_core import IllConditionedError, InfeasibleError
from ..model.utils import as_array


def _check_norm(norm) -> str:
    if not isinstance(norm, str) or norm not in ("fro", "nuc"):
        raise ValueError(f"norm must be 'fro' (Att-SVM) or 'nuc' (Att-SVM*), got {norm!r}")
    return norm


def _alpha(alpha, shape: tuple[int, ...], T: int) -> torch.Tensor:
    """Token indices of ``shape`` in ``[0, T)``, as an integer tensor."""
    alpha = as_array(alpha, "alpha")
    if alpha.dtype.is_floating_point or alpha.dtype == torch.bool or tuple(alpha.shape) != shape:
        raise ValueError(f"alpha must have shape {shape} (integer token indices), got "
                         f"{alpha.dtype} {tuple(alpha.shape)}")
    if alpha.numel() and (bool((alpha < 0).any()) or bool((alpha >= T).any())):
        raise ValueError(f"alpha must hold token indices in [0, {T - 1}], got {alpha.tolist()}")
    return alpha


def check_saturation(saturation) -> float | None:
    """A saturation threshold in (0.5, 1), or None (the argmax rule)."""
    if saturation is not None and (isinstance(saturation, bool) or not isinstance(saturation, (int, float))):
        raise TypeError(f"saturation must be a number in (0.5, 1) or None (argmax), got {saturation!r}")
    if saturation is not None and not 0.5 < saturation < 1:
        raise ValueError(f"saturation must be in (0.5, 1), got {saturation!r}")
    return saturation


KINDS = ("global", "locally optimal", "not locally optimal", "infeasible", "ill-conditioned")
OUTCOMES = ("global", "locally optimal", "not locally optimal", "ill-conditioned", "unsaturated")
MAX_SELECTIONS = 100_000
SOLVED_MEMORY = (4096, 64 * 2 ** 20)
"""At most how many Att-SVM outcomes, and how many bytes of data and solutions, :func:`_solved`
remembers (the least recently used are dropped first)."""
_SOLVED: OrderedDict[tuple, tuple[str, SVMResult | None, int]] = OrderedDict()
_SOLVED_BYTES = [0]


def _solved(X: torch.Tensor, Z: torch.Tensor, mask: torch.Tensor | None, alpha: tuple[int, ...],
            norm: str) -> tuple[str, SVMResult | None]:
    """``("solved", result)``, ``("infeasible", None)`` or ``("ill-conditioned", None)``: Att-SVM
    of one CPU instance for ``alpha``, remembered by the data itself (the bytes of ``X``, ``Z`` and
    the mask), the selection and the norm, so that classifying the same runs again (under another
    saturation rule, or after more steps) solves no SVM twice. ``att_svm`` is deterministic, so a
    remembered outcome is the one a new solve would give."""
    key = (str(X.dtype), tuple(X.shape), X.detach().numpy().tobytes(), Z.detach().numpy().tobytes(),
           None if mask is None else mask.numpy().tobytes(), alpha, norm)
    if key in _SOLVED:
        _SOLVED.move_to_end(key)
        status, result, _ = _SOLVED[key]
        return status, _copy(result)
    try:
        status, result = "solved", att_svm(X, Z, torch.tensor(alpha, dtype=torch.int64), norm, mask=mask)
    except InfeasibleError:
        status, result = "infeasible", None
    except IllConditionedError:
        status, result = "ill-conditioned", None
    size = len(key[2]) + len(key[3]) + (0 if result is None else 8 * (result.W.numel() + 2 * result.margins.numel()))
    _SOLVED[key] = status, _copy(result), size        # a caller may change its copy in place
    _SOLVED_BYTES[0] += size
    while len(_SOLVED) > SOLVED_MEMORY[0] or _SOLVED_BYTES[0] > SOLVED_MEMORY[1]:
        _SOLVED_BYTES[0] -= _SOLVED.popitem(last=False)[1][2]
    return status, result


def _copy(result: SVMResult | None) -> SVMResult | None:
    """A copy of a remembered result whose tensors the caller may change without touching it."""
    return None if result is None else replace(result, W=result.W.clone(),
                                               margins=result.margins.clone(),
                                               support=result.support.clone())


def _solve_kind(X: torch.Tensor, Z: torch.Tensor, mask: torch.Tensor | None, scores: np.ndarray,
                opt: tuple[int, ...], alpha: tuple[int, ...], norm: str) -> tuple[str, SVMResult | None]:
    """The kind of the checked selection ``alpha`` of one checked CPU instance with token scores
    ``scores (n, T)`` and optimal tokens ``opt``: the body of :func:`selection_kind` without the
    checks and without building a :class:`Problem`, for loops over many selections. Global is
    ``alpha == opt`` (:func:`attnsvm.model.metrics.is_global`); locally optimal is paper A Def. 2 as in
    :func:`attnsvm.maxmargin.svm.is_locally_optimal`: every support token scores below the selected one."""
    status, result = _solved(X, Z, mask, alpha, norm)
    if result is None:
        return status, None
    if alpha == opt:
        return "global", result
    selected = scores[np.arange(len(alpha)), list(alpha)][:, None]
    if bool(((scores < selected) | ~result.support.numpy()).all()):
        return "locally optimal", result
    return "not locally optimal", result


def _instance(problem: Problem) -> tuple:
    """``(X, Z, mask, scores, opt)`` of a checked problem on the CPU (a trials dimension allowed):
    what :func:`_solve_kind` needs, computed once for all selections and runs."""
    problem = problem.to("cpu")
    return problem.X, problem.Z, problem.mask, problem.scores.detach().numpy(), problem.opt.numpy()


def selection_kind(problem: Problem, alpha, norm: str = "fro") -> tuple[str, SVMResult | None]:
    """The kind of one selection (an entry of :data:`KINDS`) and its SVM solution (None if
    infeasible). ``problem`` is one instance (no trials dimension)."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if problem.batch_shape:
        raise ValueError("pass one instance (use problem.trial(b) on batched problems)")
    _check_norm(norm)
    alpha = _alpha(alpha, (problem.n,), problem.T)
    X, Z, mask, scores, opt = _instance(problem)
    return _solve_kind(X, Z, mask, scores, tuple(opt.tolist()), tuple(alpha.tolist()), norm)


def classify_selections(problem: Problem, norm: str = "fro"
                        ) -> dict[tuple[int, ...], tuple[str, SVMResult | None]]:
    """Solve Att-SVM for every one of the ``T^n`` selections of ``problem`` and classify it
    (:func:`selection_kind`; the instance is checked and prepared once for all selections).

    Returns ``{alpha: (kind, result)}`` in lexicographic order of ``alpha``. Raises
    ``ValueError`` when ``T^n`` exceeds :data:`MAX_SELECTIONS` (use :func:`selection_kind` on the
    selections you need instead).
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if problem.batch_shape:
        raise ValueError("pass one instance (use problem.trial(b) on batched problems)")
    _check_norm(norm)
    if problem.T ** problem.n > MAX_SELECTIONS:
        raise ValueError(f"T^n = {problem.T}^{problem.n} selections is more than "
                         f"{MAX_SELECTIONS}; classify chosen selections with selection_kind")
    X, Z, mask, scores, opt = _instance(problem)
    allowed = [range(problem.T)] * problem.n if mask is None else \
        [torch.nonzero(row).flatten().tolist() for row in mask]
    opt = tuple(opt.tolist())
    return {alpha: _solve_kind(X, Z, mask, scores, opt, alpha, norm)
            for alpha in itertools.product(*allowed)}


def run_outcomes(problem: Problem, probabilities: torch.Tensor, saturation: float | None = 0.99,
                 norm: str = "fro") -> tuple[torch.Tensor, list[str]]:
    """Where each of a batch of training runs ended: its selection and the kind of that selection.

    ``probabilities`` ``(B, n, T)`` are the runs' final softmax probabilities on ``problem``
    (``B`` trials). The selection ``alpha_b`` is the top token of each example. A run is
    ``"unsaturated"`` when some example puts less than ``saturation`` on its top token (the run
    has not chosen yet; ``saturation=None`` is the argmax rule: every run has chosen its top
    tokens); otherwise its kind is that of Att-SVM(alpha) in :data:`OUTCOMES`:
    ``"global"`` (alpha = opt), ``"locally optimal"`` (a non-global locally optimal selection),
    ``"not locally optimal"`` or ``"ill-conditioned"``. A saturated selection is feasible (every
    selected logit beats the others), so "infeasible" cannot occur; the SVM is solved only for
    saturated non-global selections, once per distinct ``(b, alpha_b)``. (Under the argmax rule a
    top token tied with another would make its selection ``"infeasible"``; float probabilities
    practically never tie.)

    Returns ``(alpha (B, n), kinds)``.
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
    if len(problem.batch_shape) != 1:
        raise ValueError("run_outcomes needs a problem with one trials dimension (B, n, T, d)")
    _check_norm(norm)
    check_saturation(saturation)
    probabilities = as_array(probabilities, "probabilities")
    if not probabilities.is_floating_point():
        raise TypeError(f"probabilities must be floating softmax outputs, got {probabilities.dtype}")
    expected = (problem.batch_shape[0], problem.n, problem.T)
    if tuple(probabilities.shape) != expected:
        raise ValueError(f"probabilities must have shape {expected} (trials, n, T), got "
                         f"{tuple(probabilities.shape)}")
    if not bool(torch.isfinite(probabilities).all()):
        raise ValueError("probabilities contain NaN or inf: the runs diverged")
    if bool((probabilities < 0).any()) or bool((probabilities > 1).any()) or bool(
            ((probabilities.sum(-1) - 1).abs() > 1e-6).any()):
        raise ValueError("probabilities must be softmax outputs: in [0, 1], each row summing to 1 "
                         "(pass attention.probabilities(problem))")
    probabilities = probabilities.detach().cpu()
    alpha = selected_tokens(probabilities)
    top = probabilities.max(dim=-1).values
    saturated = torch.ones_like(top[..., 0], dtype=torch.bool) if saturation is None else \
        (top >= saturation).all(dim=-1)
    X, Z, mask, scores, opt = _instance(problem)
    kinds = []
    for b, (a, is_saturated) in enumerate(zip(alpha.tolist(), saturated.tolist())):
        if not is_saturated:
            kinds.append("unsaturated")
        elif a == opt[b].tolist():
            kinds.append("global")
        else:
            kinds.append(_solve_kind(X[b], Z[b], mask if mask is None or mask.ndim == 2 else mask[b],
                                     scores[b], tuple(opt[b].tolist()), tuple(a), norm)[0])
    return alpha, kinds


def _data_key(problem: Problem) -> tuple:
    """The data of one instance as a hashable key: shapes, dtypes and bytes of X, Z and the mask."""
    parts = [problem.X, problem.Z] + ([] if problem.mask is None else [problem.mask])
    return tuple((tuple(t.shape), str(t.dtype), t.detach().cpu().numpy().tobytes()) for t in parts)


class SVMCache:
    """Att-SVM (``norm="fro"``) and Att-SVM* (``"nuc"``) solutions, each solved once.

    Experiments that need the same SVM several times (every selection of every A3 instance, in the
    Frobenius and the nuclear norm) keep one cache. An entry is keyed by the instance's data
    itself (tokens, queries, mask), the selection and the norm, so two instances never share an
    entry. ``seconds[norm]`` lists the wall time of every solve actually made.
    """

    def __init__(self) -> None:
        self._solutions: dict[tuple, SVMResult] = {}
        self.seconds: dict[str, list[float]] = {"fro": [], "nuc": []}

    def solve(self, problem: Problem, alpha, norm: str = "fro") -> SVMResult:
        """The solution of one instance (no trials dimension) for its selection ``alpha`` (n,)."""
        if not isinstance(problem, Problem):
            raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
        if problem.batch_shape:
            raise ValueError("SVMCache.solve takes one instance (n, T, d); use SVMCache.stack for a "
                             "batched problem")
        _check_norm(norm)
        alpha = _alpha(alpha, (problem.n,), problem.T)
        key = (_data_key(problem), tuple(int(a) for a in alpha.reshape(-1)), tuple(alpha.shape), norm)
        if key not in self._solutions:
            start = time.perf_counter()
            result = att_svm(problem.X, problem.Z, alpha, norm, mask=problem.mask)
            self.seconds.setdefault(norm, []).append(time.perf_counter() - start)
            self._solutions[key] = result
        return self._solutions[key]

    def stack(self, problem: Problem, alpha, norm: str = "fro") -> torch.Tensor:
        """The solution of every instance of a batched problem for its selection ``alpha[b]``,
        shape ``(B, d, d)``. Raises :class:`InfeasibleError` naming the trial that is infeasible."""
        if not isinstance(problem, Problem):
            raise TypeError(f"problem must be an attnsvm Problem, got {type(problem).__name__}")
        if len(problem.batch_shape) != 1:
            raise ValueError("svm_stack and SVMCache.stack need a problem with one trials dimension "
                             "(B, n, T, d); for one instance use SVMCache.solve")
        _check_norm(norm)
        alpha = _alpha(alpha, (problem.batch_shape[0], problem.n), problem.T)
        solutions = []
        for b in range(alpha.shape[0]):
            try:
                solutions.append(self.solve(problem.trial(b), alpha[b], norm).W)
            except InfeasibleError as error:
                raise InfeasibleError(f"trial {b}: {error}") from None
        return torch.stack(solutions)


def svm_stack(problem: Problem, alpha, norm: str = "fro") -> torch.Tensor:
    """The Att-SVM (``norm="fro"``) or Att-SVM* (``"nuc"``) solution of every instance of a
    batched problem for its selection ``alpha[b]``, honouring the problem's token mask; shape
    ``(B, d, d)``. Raises :class:`InfeasibleError` naming the trial that is infeasible. (Without
    memory; :class:`SVMCache` keeps the solutions.)"""
    return SVMCache().stack(problem, alpha, norm)
