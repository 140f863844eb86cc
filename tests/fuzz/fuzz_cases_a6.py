"""Fuzz cases for attnsvm.studies.a6 (paper A's multi-token A6 study): bad sizes, settings, shapes, labels
and non-finite data."""

from __future__ import annotations

import random
from typing import Callable

import torch
from fuzz_inputs import NON_FINITE, NON_NUMERIC

import attnsvm as A

# the study's result container (built by a6_study, no input of its own)
EXEMPT = {"A6Study"}


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    entry = "a6 study"
    found = []
    X, Y, Z, V, W0 = A.studies.a6_draw(2, 3, A.set_seed(rng.randrange(1000)))

    def add(kind, what, thunk):
        found.append((entry, kind, what, thunk))

    for bad in [0, -2, 2.5, True] + NON_FINITE + NON_NUMERIC:
        add("count", f"a6_study d={bad!r}", lambda b=bad: A.studies.a6_study(b, 1, A.set_seed(0), steps=1, every=1))
        add("count", f"a6_study n_accepted={bad!r}", lambda b=bad: A.studies.a6_study(4, b, A.set_seed(0), steps=1, every=1))
    for key, values in (("steps", [0, 150, -1, 1.5]), ("every", [0, 7, -1]), ("lr", [0.0, -0.1] + NON_FINITE),
                        ("eps", [-1.0] + NON_FINITE), ("plan", [0.0, 1.5, -0.2] + NON_FINITE),
                        ("keep", [0.0, 2.0, 1e-7]), ("masked", [0.0, 1e-2, -1e-6]), ("n_rejected", [-1, 0.5])):
        for bad in values:
            kw = {"steps": 100, "every": 100, key: bad}
            add("setting", f"a6_study {key}={bad!r}", lambda k=kw: A.studies.a6_study(4, 1, A.set_seed(0), **k))
    for bad in ["seed", 3, object()]:
        add("generator", f"a6_study generator={bad!r}", lambda b=bad: A.studies.a6_study(4, 1, b, steps=1, every=1))
    add("hopeless", "a6_study accepting nothing", lambda: A.studies.a6_study(4, 1, A.set_seed(0), steps=1, every=1, plan=1.0, n_rejected=0))
    # attention_probabilities
    for what, args in (("W (d, d-1)", (W0[..., :-1], X, Z)), ("Z of another d", (W0, X, Z[..., :2])),
                       ("Z of another n", (W0, X, Z[:, :2])), ("X without tokens", (W0, X[:, :, :0], Z)),
                       ("batch mismatch", (W0[:1].expand(3, 3, 3), X, Z)), ("W a vector", (W0[0, 0], X, Z))):
        add("shape", f"attention_probabilities {what}", lambda a=args: A.studies.attention_probabilities(*a))
    for bad in NON_FINITE:
        add("non-finite", f"attention_probabilities W with {bad}",
            lambda b=bad: A.studies.attention_probabilities(torch.full_like(W0, b), X, Z))
    for bad in NON_NUMERIC:
        add("type", f"attention_probabilities W={bad!r}", lambda b=bad: A.studies.attention_probabilities(b, X, Z))
    # gen_svm_violation
    sets = torch.tensor([[True, False, False, False]] * 3)
    for what, args in (("X batched", (W0[0], X, Z[0], sets)), ("W wrong d", (W0[0, :2], X[0], Z[0], sets)),
                       ("Z wrong n", (W0[0], X[0], Z[0, :2], sets)), ("sets wrong T", (W0[0], X[0], Z[0], sets[:, :3])),
                       ("an empty set", (W0[0], X[0], Z[0], sets & False)),
                       ("sets not boolean", (W0[0], X[0], Z[0], sets.double() * 0.5))):
        add("shape", f"gen_svm_violation {what}", lambda a=args: A.studies.gen_svm_violation(*a))
    for bad in NON_FINITE:
        add("non-finite", f"gen_svm_violation X with {bad}",
            lambda b=bad: A.studies.gen_svm_violation(W0[0], torch.full_like(X[0], b), Z[0], sets))
    for bad in NON_NUMERIC:
        add("type", f"gen_svm_violation W={bad!r}", lambda b=bad: A.studies.gen_svm_violation(b, X[0], Z[0], sets))
    # the relaxed Gen-SVM of chapter 6 (gen_svm's `relaxed`): a bad mask, or every example relaxed
    for bad in (torch.tensor([True]), torch.tensor([1, 0, 0]), torch.ones(3, 4, dtype=torch.bool),
                torch.ones(3, dtype=torch.bool)) + tuple(b for b in NON_NUMERIC if b is not None):
        add("relaxed", f"gen_svm relaxed={bad!r}", lambda b=bad: A.gen_svm(X[0], Z[0], sets, relaxed=b))
    return found
