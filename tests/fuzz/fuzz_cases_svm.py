"""Fuzz cases for attnsvm.att_svms (batched Att-SVM / Att-SVM*): bad problems, selections and
options, and valid extreme batches (one trial; data of scale 1e-150 and 1e150) checked against
att_svm on each trial."""

from __future__ import annotations

import random
from typing import Callable

import torch
from fuzz_inputs import NON_FINITE, NON_NUMERIC, checked

import attnsvm as A


def _same_as_alone(problem, norm):
    def check(results):
        return all(abs(r.objective - A.att_svm(problem.X[b], problem.Z[b], problem.opt[b], norm).objective)
                   <= 1e-7 * r.objective for b, r in enumerate(results))
    return checked(lambda: A.att_svms(problem, problem.opt, norm), check)


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    entry = "att_svms"
    P = A.random_problem(3, 4, 5, trials=3, generator=A.set_seed(rng.randrange(1000)))
    found = [
        (entry, "type", "a tensor instead of a Problem", lambda: A.att_svms(P.X, P.opt)),
        (entry, "shape", "one instance (no trials dimension)", lambda: A.att_svms(P.trial(0), P.opt[0])),
        (entry, "shape", "alpha of one trial", lambda: A.att_svms(P, P.opt[0])),
        (entry, "selection", "alpha out of range", lambda: A.att_svms(P, P.opt + 10)),
        (entry, "selection", "alpha not integer", lambda: A.att_svms(P, P.opt.double())),
    ]
    for bad in ["l1", "spectral", None, 2]:
        found.append((entry, "option", f"norm={bad!r}", lambda b=bad: A.att_svms(P, P.opt, b)))
    for bad in [0.0, -1e-5, 2.0] + NON_FINITE + NON_NUMERIC[:3]:
        found.append((entry, "option", f"rank_tol={bad!r}", lambda b=bad: A.att_svms(P, P.opt, rank_tol=b)))
        found.append((entry, "option", f"support_tol={bad!r}",
                      lambda b=bad: A.att_svms(P, P.opt, support_tol=b)))
    for value in NON_FINITE:
        X = P.X.clone()
        X[1, 0, 0] = value
        found.append((entry, "nan/inf", f"X with {value}",
                      lambda X=X: A.att_svms(A.Problem(X, P.Y, P.Z, P.v), P.opt, "nuc")))
    for scale in (1e-150, 1e150):
        Q = A.Problem(P.X * scale, P.Y, P.Z, P.v)
        for norm in ("fro", "nuc"):
            found.append((entry, "correct", f"data x {scale:g}, {norm}", _same_as_alone(Q, norm)))
    found.append((entry, "correct", "one trial, nuc", _same_as_alone(P.select(slice(1)), "nuc")))
    return found
