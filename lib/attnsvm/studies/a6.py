"""Paper A's multi-token experiment with a ReLU head (the reproduction report, id A6) as one study.

:func:`a6_study` draws runs of the authors' protocol (:func:`attnsvm.studies.a6_draw`), trains them with the
closed-form normalized GD (:func:`attnsvm.studies.ngd_relu_head`), applies the authors' acceptance filter
(:func:`attnsvm.maxmargin.selected_sets`) and, for every clear run, solves Gen-SVM, the least-norm finite part
and the one-token Att-SVM (paper A's Gen-SVM and SVM-equivalence, a conjecture: "no rigorous theory
yet"). It keeps every count (with Wilson intervals), the error curves of the accepted runs against
the three predictions, and what the book needs to continue the accepted runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from ..maxmargin.gensvm import KEEP, MASKED, _check_data, _direction_and_finite_part, selected_sets
from ..maxmargin.svm_eq import svm_eq_fit
from ..model.metrics import corr, correlation
from .reluhead import a6_draw, ngd_relu_head, span_iterates
from ..book.report import proportion_interval
from ..maxmargin.svm import att_svm
from ..maxmargin._svm_core import IllConditionedError, InfeasibleError
from ..model.utils import as_mask, as_tensor, broadcast_shape, check_count, check_generator, check_positive

A6_EPS = float(torch.finfo(torch.float64).eps)     # the authors' eps in ||g|| + eps (2.2e-16)
A6_PLAN = {4: 0.2, 6: 0.09, 8: 0.043, 10: 0.019}  # planning guesses of the acceptance per drawn run
COUNTS = ("drawn", "skipped", "trained", "ambiguous", "nothing_masked", "clear", "failed", "accepted",
          "full", "one_token")
KIND_NAMES = {0: "all single-token", 1: "several, no full set", 2: "some input keeps all"}


class A6Runs(NamedTuple):
    """The curve runs of an :class:`A6Study`, stacked along a leading run axis ``B``, to continue
    them (book chapter 6): tokens ``X (B, n, T, d)``, labels ``Y (B, n)``, queries ``Z (B, n, d)``,
    ReLU-head weights ``V (B, d, d)`` (:func:`a6_draw`), the last iterate
    ``W_last (B, d, d)``, the Gen-SVM direction ``W_dir (B, d, d)`` and the kept sets
    ``sets (B, n, T)`` (True = kept). A tuple: ``X, Y, Z, V, W_last, W_dir, sets = runs`` works."""

    X: torch.Tensor
    Y: torch.Tensor
    Z: torch.Tensor
    V: torch.Tensor
    W_last: torch.Tensor
    W_dir: torch.Tensor
    sets: torch.Tensor


def attention_probabilities(W, X, Z) -> torch.Tensor:
    """Softmax probabilities ``S(X_i W z_i)`` ``(..., n, T)`` of a batch of ``W (..., d, d)`` on
    tokens ``X (..., n, T, d)`` and queries ``Z (..., n, d)`` (the model of paper A, section 2)."""
    W, X, Z = as_tensor(W, "W"), as_tensor(X, "X"), as_tensor(Z, "Z")
    if W.ndim < 2 or X.ndim < 3 or Z.ndim < 2 or not (W.numel() and X.numel() and Z.numel()):
        raise ValueError(f"need W (..., d, d), X (..., n, T, d) and Z (..., n, d), non-empty; got "
                         f"{tuple(W.shape)}, {tuple(X.shape)} and {tuple(Z.shape)}")
    d = X.shape[-1]
    if W.shape[-2:] != (d, d) or Z.shape[-1] != d or Z.shape[-2] != X.shape[-3]:
        raise ValueError(f"shapes do not match: W {tuple(W.shape)}, X {tuple(X.shape)}, Z {tuple(Z.shape)}")
    try:                         # checked here: einsum's own error depends on opt_einsum's presence
        broadcast_shape(W.shape[:-2], X.shape[:-3], Z.shape[:-2])
    except RuntimeError:
        raise ValueError(f"batch dimensions of W {tuple(W.shape)}, X {tuple(X.shape)} and Z "
                         f"{tuple(Z.shape)} do not match") from None
    return torch.softmax(torch.einsum("...ntd,...de,...ne->...nt", X, W, Z), dim=-1)


def gen_svm_violation(W, X, Z, selected) -> float:
    """Largest violation of the Gen-SVM constraints (paper A; :func:`attnsvm.gen_svm`) by ``W (d, d)``
    for the sets ``selected`` (boolean ``(n, T)``): the spread of the logits inside a set, and
    ``1 - (smallest inside logit - largest outside logit)`` where a token is outside. 0 if met."""
    W, X, Z = as_tensor(W, "W"), as_tensor(X, "X"), as_tensor(Z, "Z")
    if X.ndim != 3 or not X.numel():
        raise ValueError(f"X must have shape (n, T, d), non-empty, got {tuple(X.shape)}")
    n, T, d = X.shape
    if tuple(W.shape) != (d, d) or tuple(Z.shape) != (n, d):
        raise ValueError(f"need W ({d}, {d}) and Z ({n}, {d}), got {tuple(W.shape)} and {tuple(Z.shape)}")
    sets = as_mask(selected, "selected", (n, T))
    if not bool(sets.any(-1).all()):
        raise ValueError("every set must contain a token: a row of `selected` is all False")
    return float(_violations(W[None], X[None], Z[None], sets[None])[0])


def _violations(W: torch.Tensor, X: torch.Tensor, Z: torch.Tensor, sets: torch.Tensor) -> torch.Tensor:
    """:func:`gen_svm_violation` of a batch of checked runs: ``W (B, d, d)``, ``X (B, n, T, d)``,
    ``Z (B, n, d)``, ``sets (B, n, T)``; returns ``(B,)``."""
    logits = torch.einsum("bntd,bde,bne->bnt", X, W, Z)
    inside_min = torch.where(sets, logits, torch.inf).amin(-1)
    inside_max = torch.where(sets, logits, -torch.inf).amax(-1)
    outside = torch.where(sets, -torch.inf, logits).amax(-1)
    spread = (inside_max - inside_min).amax(-1)                  # >= 0
    margin = torch.where(sets.all(-1), -torch.inf, 1 - (inside_min - outside)).amax(-1)
    return torch.maximum(spread, margin)


@dataclass(frozen=True)
class A6Study:
    """What :func:`a6_study` measured at one ``d``.

    Attributes:
        d: the dimension.
        counts: ``drawn``, ``skipped`` (no ``-1`` label), ``trained``, ``ambiguous``,
            ``nothing_masked``, ``clear``, ``failed`` (a solve raised), ``accepted``, ``full`` (an
            input keeps all its tokens), ``one_token`` (every set a single token).
        curves: ``"eq"``, ``"dir"``, ``"one"``: ``1 - corr(W_k, .)`` ``(runs, logged steps)`` for the
            first ``n_accepted`` accepted runs against the SVM-eq fit (at the last iterate), the
            Gen-SVM direction and the one-token Att-SVM.
        steps: the logged steps.
        kind: per curve run, 0 all single-token, 1 several tokens without a full set, 2 a full set.
        masked_max: per curve run, its largest probability below the keep threshold.
        late_move: per curve run, ``||W_last - W_previous logged||_F``.
        rejected_one: ``1 - corr(W_last, one-token Att-SVM)`` of the first rejected runs.
        norms: ``||W_last||_F`` of the accepted (curve) runs, ``"acc"``, the ambiguous ones, ``"amb"``,
            and those with nothing masked, ``"none"``.
        violation: the largest Gen-SVM constraint violation of an accepted run's direction.
        runs: the curve runs, stacked (:class:`A6Runs`: ``X, Y, Z, V, W_last, W_dir, sets``).
        train_s, solve_s: seconds spent training and solving.
    """

    d: int
    counts: dict
    curves: dict
    steps: torch.Tensor
    kind: torch.Tensor
    masked_max: torch.Tensor
    late_move: torch.Tensor
    rejected_one: torch.Tensor
    norms: dict
    violation: float
    runs: A6Runs
    train_s: float
    solve_s: float

    @property
    def rate(self) -> tuple[float, float, float]:
        """Accepted per trained run, with its Wilson 95% interval: ``(rate, low, high)``."""
        c = self.counts
        return (c["accepted"] / c["trained"], *proportion_interval(c["accepted"], c["trained"]))

    @property
    def rate_drawn(self) -> tuple[float, float, float]:
        """Accepted per drawn run (the authors' loop counts the skipped seeds), with its interval."""
        c = self.counts
        return (c["accepted"] / c["drawn"], *proportion_interval(c["accepted"], c["drawn"]))


def _solve_run(X: np.ndarray, Z: np.ndarray, s: np.ndarray, sets: np.ndarray, alpha: np.ndarray) -> dict:
    """Gen-SVM direction, finite part and one-token Att-SVM (of the tokens ``alpha``) of one clear
    run, from checked arrays (``sets``: the probabilities ``s`` at least the keep threshold)."""
    W_dir, W_fin = _direction_and_finite_part(X, Z, sets, s)
    one = att_svm(X, Z, alpha).W
    return {"dir": W_dir, "fin": W_fin, "one": one, "sets": torch.from_numpy(sets),
            "full": bool(sets.all(-1).any()), "single": bool((sets.sum(-1) == 1).all())}


def _checked_arrays(X: torch.Tensor, Z: torch.Tensor, s: torch.Tensor, clear: torch.Tensor,
                    keep: float) -> tuple[np.ndarray, ...]:
    """A batch of runs as the arrays :func:`_solve_run` takes, checked once for all its runs (the
    checks :func:`attnsvm.gen_svm` and :func:`attnsvm.maxmargin.finite_part` make per run): ``X``, ``Z``,
    ``s``, the sets ``s >= keep`` (non-empty in every clear run) and the most likely tokens."""
    B, n, T, d = X.shape
    Xn, Zn = _check_data(X.reshape(B * n, T, d), Z.reshape(B * n, d))
    sets = s >= keep
    empty = clear[:, None] & ~sets.any(-1)
    if bool(empty.any()):
        b, i = (int(k) for k in empty.nonzero()[0])
        raise ValueError(f"run {b}, example {i} selects no token (no probability >= keep = {keep}): "
                         "every set O_i needs one")
    return (Xn.reshape(B, n, T, d), Zn.reshape(B, n, d), s.numpy(), sets.numpy(),
            s.argmax(-1).numpy())


def a6_study(d: int, n_accepted: int, generator: torch.Generator | None = None, *, steps: int = 2000,
             lr: float = 0.1, eps: float = A6_EPS, every: int = 100, plan: float | None = None,
             n_rejected: int = 300, keep: float = KEEP, masked: float = MASKED) -> A6Study:
    """The A6 study at dimension ``d`` (the reproduction report): draw batches of the authors' protocol
    (``n = 3``, ``T = 4``; a batch sized for ``n_accepted`` at the planned acceptance ``plan``, with
    a 5% margin, and another while short), skip runs without a ``-1`` label, train ``steps`` steps
    of normalized GD (log every ``every``), filter (``keep``/``masked``: the authors' 1e-3 and
    1e-6), and solve every clear run; a solve that raises counts as ``failed``. Curves are kept for
    the first ``n_accepted`` accepted runs in draw order; ``n_rejected`` rejected runs are compared
    with their one-token Att-SVM. Deterministic for a seeded ``generator``."""
    d, n_accepted = check_count(d, "d", 1), check_count(n_accepted, "n_accepted", 1)
    check_generator(generator)
    steps, every = check_count(steps, "steps", 1), check_count(every, "every", 1)
    if steps % every:
        raise ValueError(f"steps ({steps}) must be a multiple of every ({every})")
    n_rejected = check_count(n_rejected, "n_rejected")
    lr, eps = check_positive(lr, "lr"), check_positive(eps, "eps", allow_zero=True)
    plan = check_positive(A6_PLAN.get(d, 0.02) if plan is None else plan, "plan", upper=1.0)
    masked, keep = check_positive(masked, "masked", upper=1.0), check_positive(keep, "keep", upper=1.0)
    if not masked < keep:
        raise ValueError(f"need masked < keep, got masked={masked} and keep={keep}")
    st = dict.fromkeys(COUNTS, 0)
    curves, rejected = {"eq": [], "dir": [], "one": []}, []
    norms = {"acc": [], "amb": [], "none": []}
    kind, masked_max, late_move, runs, worst = [], [], [], [], []
    train_s = solve_s = 0.0
    while st["accepted"] < n_accepted:
        if st["drawn"] > 20 * (n_accepted / plan + 100):
            raise ValueError(f"only {st['accepted']} of {st['drawn']} drawn runs accepted at d = {d}, far "
                             f"below the planned acceptance {plan}: pass a smaller `plan`")
        size = int(1.05 * (n_accepted - st["accepted"]) / plan) + 100
        X, Y, Z, V, W0 = a6_draw(size, d, generator)
        has_minus = (Y < 0).any(-1)
        st["drawn"] += size
        st["skipped"] += int((~has_minus).sum())
        X, Y, Z, V, W0 = X[has_minus], Y[has_minus], Z[has_minus], V[has_minus], W0[has_minus]
        st["trained"] += len(X)
        if not len(X):
            continue
        start = time.perf_counter()
        beta = ngd_relu_head(X, Y, Z, V, W0, steps=steps, lr=lr, eps=eps, every=every)
        train_s += time.perf_counter() - start
        W_last = span_iterates(beta[-1], X, Z, W0)
        s = attention_probabilities(W_last, X, Z)
        ambiguous = ((s > masked) & (s < keep)).flatten(1).any(1)
        nothing = ~(s <= masked).flatten(1).any(1)
        _, clear = selected_sets(s, keep=keep, masked=masked)
        st["ambiguous"] += int(ambiguous.sum())
        st["nothing_masked"] += int((~ambiguous & nothing).sum())
        st["clear"] += int(clear.sum())
        norms["amb"].append(W_last[ambiguous].flatten(1).norm(dim=1))
        norms["none"].append(W_last[~ambiguous & nothing].flatten(1).norm(dim=1))
        start = time.perf_counter()
        for b in torch.nonzero(~clear).flatten()[:max(0, n_rejected - len(rejected))].tolist():
            one = att_svm(X[b], Z[b], s[b].argmax(-1)).W
            rejected.append(1 - float(correlation(W_last[b], one)))
        chosen, solutions, solved = [], [], []         # the curve runs of this batch; the solved
        arrays = _checked_arrays(X, Z, s, clear, keep)
        for b in torch.nonzero(clear).flatten().tolist():
            try:
                sol = _solve_run(*(array[b] for array in arrays))
            except (InfeasibleError, IllConditionedError):
                st["failed"] += 1
                continue
            st["accepted"] += 1
            st["full"] += int(sol["full"])
            st["one_token"] += int(sol["single"])
            solved.append((b, sol["dir"], sol["sets"]))
            if len(kind) < n_accepted:
                chosen.append(b)
                solutions.append(sol)
                kind.append(2 if sol["full"] else 0 if sol["single"] else 1)
                masked_max.append(float(s[b][s[b] < keep].max()))
        if solved:                                    # the Gen-SVM constraints, all runs at once
            rows, W_dirs, sets = zip(*solved)
            worst.append(float(_violations(torch.stack(W_dirs), X[list(rows)], Z[list(rows)],
                                           torch.stack(sets)).max()))
        if chosen:                                    # every logged iterate of the curve runs at once
            Ws = span_iterates(beta[:, chosen], X[chosen], Z[chosen], W0[chosen]).transpose(0, 1)
            targets = {key: torch.stack([sol[key] for sol in solutions])
                       for key in ("dir", "fin", "one")}
            targets["eq"] = svm_eq_fit(W_last[chosen], targets["fin"], targets["dir"])[1]
            for key in curves:
                curves[key].append(1 - corr(Ws, targets[key][:, None], 2))
            norms["acc"].append(Ws[:, -1].flatten(1).norm(dim=1))
            late_move.append((Ws[:, -1] - Ws[:, -2]).flatten(1).norm(dim=1))
            runs.extend((X[b], Y[b], Z[b], V[b], W[-1], sol["dir"], sol["sets"])
                        for b, W, sol in zip(chosen, Ws, solutions))
        solve_s += time.perf_counter() - start
    f64 = torch.float64
    return A6Study(d=d, counts=st, curves={k: torch.cat(v) for k, v in curves.items()},
                   steps=torch.arange(0, steps + 1, every), kind=torch.tensor(kind),
                   masked_max=torch.tensor(masked_max, dtype=f64),
                   late_move=torch.cat(late_move),
                   rejected_one=torch.tensor(rejected, dtype=f64),
                   norms={k: torch.cat(v) if v else torch.zeros(0, dtype=f64) for k, v in norms.items()},
                   violation=max(worst), runs=A6Runs(*(torch.stack(t) for t in zip(*runs))),
                   train_s=train_s, solve_s=solve_s)
