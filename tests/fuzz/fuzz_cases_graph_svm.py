"""Fuzz cases for attnsvm.graph_svm (next-token prediction with self-attention, the Graph-SVM)."""

from __future__ import annotations

import random
from typing import Callable

import torch

import attnsvm as A
from fuzz_inputs import NON_FINITE, NON_NUMERIC, checked

TOKENS, LABELS = [[1, 2, 0], [1, 2, 0], [1, 3, 0]], [1, 2, 1]

# the descent's result container (no input of its own; its generated __init__ has the same code as
# NTPHistory's, so the profiler of tests/fuzz/test_fuzz.py cannot tell the two apart)
EXEMPT = {"GraphHistory"}


def _data():
    return A.maxmargin.token_data(TOKENS, LABELS, 4)


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    out = []
    add = lambda entry, kind, what, thunk: out.append((entry, kind, what, thunk))  # noqa: E731
    for bad in NON_NUMERIC:
        add("token_data", "type", f"tokens={bad!r}", lambda b=bad: A.maxmargin.token_data(b, LABELS))
        add("token_data", "type", f"labels={bad!r}", lambda b=bad: A.maxmargin.token_data(TOKENS, b))
        add("priority_graphs", "type", f"data={bad!r}", lambda b=bad: A.maxmargin.priority_graphs(b))
        add("priority_sccs", "type", f"data={bad!r}", lambda b=bad: A.maxmargin.priority_sccs(b))
        add("graph_svm", "type", f"data={bad!r}", lambda b=bad: A.graph_svm(b))
        add("graph_finite_part", "type", f"data={bad!r}", lambda b=bad: A.studies.graph_finite_part(b))
        add("graph_loss", "type", f"W={bad!r}", lambda b=bad: A.studies.graph_loss(b, _data()))
        add("graph_project", "type", f"W={bad!r}", lambda b=bad: A.studies.graph_project(b, _data()))
        add("score_gaps", "type", f"edges={bad!r}", lambda b=bad: A.maxmargin.score_gaps(torch.zeros(4, 4), b))
        add("graph_gradient_descent", "type", f"lr={bad!r}", lambda b=bad: A.studies.graph_gradient_descent(_data(), 5, b))
    add("token_data", "value", "float tokens", lambda: A.maxmargin.token_data([[1.0, 2.0]], [1]))
    add("token_data", "value", "NaN tokens", lambda: A.maxmargin.token_data([[1.0, float("nan")]], [1]))
    add("token_data", "value", "negative id", lambda: A.maxmargin.token_data([[-1, 2]], [2]))
    add("token_data", "value", "id beyond vocab", lambda: A.maxmargin.token_data([[1, 5]], [1], 4))
    add("token_data", "value", "label not in its sequence", lambda: A.maxmargin.token_data([[1, 2, 0]], [3]))
    add("token_data", "value", "1-D tokens", lambda: A.maxmargin.token_data([1, 2, 0], [1]))
    add("token_data", "value", "labels of the wrong length", lambda: A.maxmargin.token_data(TOKENS, [1, 2]))
    add("token_data", "value", "no sequence", lambda: A.maxmargin.token_data(torch.zeros(0, 3, dtype=torch.long),
                                                                     torch.zeros(0, dtype=torch.long)))
    add("token_data", "value", "vocab 1", lambda: A.maxmargin.token_data([[0, 0]], [0], 1))
    add("token_data", "value", "vocab as float", lambda: A.maxmargin.token_data(TOKENS, LABELS, 4.0))
    add("graph_svm", "value", "unknown within", lambda: A.graph_svm(_data(), within="plain"))
    add("graph_svm", "value", "margin on a cycle", lambda: A.graph_svm(_data(), within="margin"))
    add("graph_svm", "correct", "one SCC only: W = 0, flagged", checked(
        lambda: A.graph_svm(A.maxmargin.token_data([[1, 2, 0]] * 3, [1, 2, 0], 3)),
        lambda r: not r.has_direction and float(r.W.abs().max()) == 0.0))
    batch = lambda *a, **k: A.studies.graph_gradient_descent_batch(*a, **k)     # noqa: E731
    for bad in NON_NUMERIC:
        add("graph_gradient_descent_batch", "type", f"datasets={bad!r}", lambda b=bad: batch(b, 5, 1.0))
        add("graph_gradient_descent_batch", "type", f"lr={bad!r}", lambda b=bad: batch([_data()], 5, b))
    for bad in NON_FINITE:
        add("graph_gradient_descent_batch", "value", f"lr={bad}", lambda b=bad: batch([_data()], 5, b))
    add("graph_gradient_descent_batch", "value", "empty list", lambda: batch([], 5, 1.0))
    add("graph_gradient_descent_batch", "value", "a list of tensors", lambda: batch([torch.zeros(3, 3)], 5, 1.0))
    add("graph_gradient_descent_batch", "value", "two vocabularies",
        lambda: batch([_data(), A.maxmargin.token_data(TOKENS, LABELS, 5)], 5, 1.0))
    add("graph_gradient_descent_batch", "value", "steps 0", lambda: batch([_data()], 0, 1.0))
    add("graph_gradient_descent_batch", "value", "log step beyond steps",
        lambda: batch([_data()], 5, 1.0, log_steps=[9]))
    add("graph_gradient_descent_batch", "value", "lr that overflows", lambda: batch([_data()], 50, 1e308))
    add("graph_gradient_descent_batch", "correct", "two datasets, one step", checked(
        lambda: batch([_data(), _data()], 1, 1.0),
        lambda h: tuple(h.iterates.shape[1:]) == (2, 4, 4) and bool(torch.isfinite(h.iterates).all())))
    for bad in NON_FINITE:
        add("graph_loss", "value", f"W with {bad}", lambda b=bad: A.studies.graph_loss(torch.full((4, 4), b), _data()))
        add("score_gaps", "value", f"W with {bad}", lambda b=bad: A.maxmargin.score_gaps(torch.full((4, 4), b), [[0, 1, 2]]))
        add("graph_gradient_descent", "value", f"lr={bad}", lambda b=bad: A.studies.graph_gradient_descent(_data(), 5, b))
        add("graph_finite_part", "value", f"tol={bad}", lambda b=bad: A.studies.graph_finite_part(_data(), tol=b))
        add("graph_project", "value", f"W with {bad}", lambda b=bad: A.studies.graph_project(torch.full((4, 4), b), _data()))
    for shape in [(4,), (3, 3), (4, 5), (2, 3, 3)]:
        add("graph_loss", "value", f"W of shape {shape}", lambda s=shape: A.studies.graph_loss(torch.zeros(s), _data()))
        add("graph_gradient_descent", "value", f"W0 of shape {shape}",
            lambda s=shape: A.studies.graph_gradient_descent(_data(), 5, 1.0, W0=torch.zeros(s)))
    add("score_gaps", "value", "edges (m, 2)", lambda: A.maxmargin.score_gaps(torch.zeros(4, 4), [[0, 1]]))
    add("score_gaps", "value", "edge id out of range", lambda: A.maxmargin.score_gaps(torch.zeros(4, 4), [[0, 1, 9]]))
    add("score_gaps", "value", "float edges", lambda: A.maxmargin.score_gaps(torch.zeros(4, 4), [[0.0, 1.0, 2.0]]))
    add("score_gaps", "value", "W not square", lambda: A.maxmargin.score_gaps(torch.zeros(4, 3), [[0, 1, 2]]))
    add("graph_gradient_descent", "value", "steps 0", lambda: A.studies.graph_gradient_descent(_data(), 0, 1.0))
    add("graph_gradient_descent", "value", "steps as float", lambda: A.studies.graph_gradient_descent(_data(), 5.0, 1.0))
    add("graph_gradient_descent", "value", "negative lr", lambda: A.studies.graph_gradient_descent(_data(), 5, -1.0))
    add("graph_gradient_descent", "value", "lr that overflows", lambda: A.studies.graph_gradient_descent(_data(), 50, 1e308))
    add("graph_gradient_descent", "value", "log step beyond steps",
        lambda: A.studies.graph_gradient_descent(_data(), 5, 1.0, log_steps=[0, 9]))
    add("graph_gradient_descent", "value", "float log steps",
        lambda: A.studies.graph_gradient_descent(_data(), 5, 1.0, log_steps=[0.5]))
    add("graph_gradient_descent", "value", "empty log steps",
        lambda: A.studies.graph_gradient_descent(_data(), 5, 1.0, log_steps=[]))
    add("graph_finite_part", "value", "tol 0", lambda: A.studies.graph_finite_part(_data(), tol=0.0))
    # valid extreme inputs: computed and checked (these also build the result containers)
    add("graph_svm", "correct", "Graph-SVM of a 2-cycle", checked(
        lambda: A.graph_svm(_data()),
        lambda r: isinstance(r, A.maxmargin.GraphSVMResult) and r.max_tie <= 1e-6 and r.min_margin >= 1 - 1e-6))
    add("graph_gradient_descent", "correct", "one step from zero", checked(
        lambda: A.studies.graph_gradient_descent(_data(), 1, 1.0),
        lambda h: isinstance(h, A.studies.GraphHistory) and bool(torch.isfinite(h.iterates).all())))
    add("token_data", "correct", "sequences of one token", checked(
        lambda: A.maxmargin.token_data([[0], [1]], [0, 1]),
        lambda d: isinstance(d, A.maxmargin.TokenData) and not bool(A.maxmargin.priority_graphs(d).any())))
    rng.random()
    return out
