"""Fuzz cases for the calling conventions of issue 32: reached_svm (which SVM a run reached),
att_svm on a Problem, att_svm_feasible of any selection, the Problem's dtype rule and repr, and
numerical_rank's one rank tolerance."""

from __future__ import annotations

import random
from typing import Callable

import torch

from fuzz_inputs import NON_FINITE, NON_NUMERIC, checked

import attnsvm as A


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    out = []

    def add(entry, kind, what, thunk):
        out.append((entry, kind, what, thunk))

    P = A.random_problem(3, 4, 5, generator=A.set_seed(rng.randrange(1000)))
    B = A.random_problem(3, 4, 5, trials=2, generator=A.set_seed(rng.randrange(1000)))
    W = A.WAttention(torch.randn(5, 5, generator=A.set_seed(1), dtype=torch.float64))
    Wb = A.WAttention(torch.randn(2, 5, 5, generator=A.set_seed(2), dtype=torch.float64))
    Wc = A.WAttention(torch.randn(3, 5, 5, generator=A.set_seed(3), dtype=torch.float64))
    # --- reached_svm ---
    for bad in NON_NUMERIC[:3] + [P.X]:
        add("reached_svm", "type", f"attention={type(bad).__name__}", lambda b=bad: A.reached_svm(b, P))
        add("reached_svm", "type", f"problem={type(bad).__name__}", lambda b=bad: A.reached_svm(W, b))
    add("reached_svm", "type", "prompt attention", lambda: A.reached_svm(A.PromptAttention(torch.zeros(5, dtype=torch.float64)), P))
    add("reached_svm", "value", "attention trials differ from the problem's", lambda: A.reached_svm(Wc, B))
    add("reached_svm", "value", "one attention over a batched problem", lambda: A.reached_svm(W, B))
    add("reached_svm", "value", "float32 attention, float64 problem",
        lambda: A.reached_svm(A.WAttention(W.W.float()), P))
    add("reached_svm", "value", "norm 'l1'", lambda: A.reached_svm(W, P, norm="l1"))
    for s in [0.0, -0.5, 1.5, None, "high"] + NON_FINITE:
        add("reached_svm", "saturation", f"saturation={s!r}", lambda s=s: A.reached_svm(W, P, saturation=s))
    add("reached_svm", "correct", "a batched attention over an unbatched problem: one answer per trial",
        checked(lambda: A.reached_svm(Wb, P), lambda r: len(r) == 2 and all(
            x.selection.tolist() == A.selected_tokens(A.WAttention(Wb.W[b]).probabilities(P)).tolist()
            for b, x in enumerate(r))))
    add("reached_svm", "correct", "the zero start: uniform softmax, not saturated",
        checked(lambda: A.reached_svm(A.WAttention.zeros(5), P),
                lambda r: not r.saturated and abs(r.top_probability - 0.25) < 1e-15))
    add("reached_svm", "correct", "W = a multiple of W^mm: global, corr 1, saturated",
        checked(lambda: A.reached_svm(A.WAttention(torch.as_tensor(A.att_svm(P).W) * 40), P),
                lambda r: r.kind == "global" and abs(r.corr - 1) < 1e-12 and r.saturated))
    # --- att_svm on a Problem ---
    add("att_svm", "type", "att_svm(problem, alpha, alpha)", lambda: A.att_svm(P, P.opt, P.opt))
    add("att_svm", "type", "att_svm(X) without Z and alpha", lambda: A.att_svm(P.X))
    add("att_svm", "type", "att_svm(X, Z) without alpha", lambda: A.att_svm(P.X, P.Z))
    add("att_svm", "type", "the problem second", lambda: A.att_svm(P.X, P, P.opt))
    add("att_svm", "value", "a batched problem", lambda: A.att_svm(B, B.opt))
    add("att_svm", "value", "a problem and a mask", lambda: A.att_svm(P, P.opt, mask=torch.ones(3, 4, dtype=torch.bool)))
    add("att_svm", "value", "a problem and a selection of the wrong length", lambda: A.att_svm(P, P.opt[:2]))
    add("att_svm", "correct", "att_svm(problem) is att_svm(X, Z, opt)",
        checked(lambda: (A.att_svm(P), A.att_svm(P.X, P.Z, P.opt)),
                lambda r: abs(r[0].objective - r[1].objective) == 0 and (r[0].W == r[1].W).all()))
    add("att_svm", "correct", "att_svm(problem, alpha=...) is att_svm(problem, alpha)",
        checked(lambda: (A.att_svm(P, alpha=P.opt), A.att_svm(P, P.opt)),
                lambda r: (r[0].W == r[1].W).all()))
    for dtype in (torch.float16, torch.bfloat16):
        add("Problem", "dtype", f"a {dtype} problem", lambda t=dtype: A.Problem(P.X.to(t), P.Y, P.Z.to(t), P.v.to(t)))
        add("Problem", "dtype", f"problem.to({dtype})", lambda t=dtype: P.to(dtype=t))
    add("numerical_rank", "rank_tol", "rank_tol=1 (no singular value counts)", lambda: A.numerical_rank(W.W, rank_tol=1.0))
    add("att_svm", "rank_tol", "rank_tol=1", lambda: A.att_svm(P, rank_tol=1.0))
    add("reached_svm", "saturation", "saturation=1.0", lambda: A.reached_svm(W, P, saturation=1.0))
    # --- the dtype rule and the repr ---
    add("Problem", "correct", "float32 X with float64 Z and v: promoted to float64, not cast down",
        checked(lambda: A.Problem(P.X.float(), P.Y, P.Z, P.v),
                lambda Q: Q.X.dtype == Q.Z.dtype == Q.v.dtype == Q.Y.dtype == torch.float64))
    add("Problem", "correct", "all float32: a float32 problem",
        checked(lambda: A.Problem(P.X.float(), P.Y, P.Z.float(), P.v.float()),
                lambda Q: Q.X.dtype == Q.Z.dtype == Q.v.dtype == torch.float32))
    add("Problem", "correct", "the repr names the sizes, not the arrays",
        checked(lambda: repr(B), lambda r: r == "Problem(trials=(2,), n=3, T=4, d=5, float64)"))
    # --- one rank tolerance ---
    for tol in [0.0, -1e-5, 2.0, "1e-5"] + NON_FINITE:
        add("numerical_rank", "rank_tol", f"rank_tol={tol!r}", lambda t=tol: A.numerical_rank(W.W, rank_tol=t))
    add("numerical_rank", "correct", "the default is RANK_TOL, att_svm's",
        checked(lambda: (int(A.numerical_rank(torch.diag(torch.tensor([1.0, 2e-5, 5e-6], dtype=torch.float64)))),
                         A.RANK_TOL), lambda r: r == (2, 1e-5)))
    # --- a frozen run is flagged, and is not "settled" ---
    def frozen_run():
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            history = A.train(A.WAttention.zeros(5), A.random_problem(3, 4, 5, generator=A.set_seed(5)),
                              steps=400, lr=10.0)
        return history, [type(w.message) for w in caught]
    add("train", "correct", "NGD past the float64 underflow: frozen flagged, warned, unsettled",
        checked(frozen_run, lambda r: int(r[0].frozen) > 0 and bool(r[0].unsettled(1e-4))
                and A.FrozenWarning in r[1]))
    # --- feasibility of any selection ---
    add("att_svm_feasible", "correct", "one instance: one verdict, as att_svm answers",
        checked(lambda: A.att_svm_feasible(P), lambda r: r is True))
    return out
