"""Fuzz cases for attnsvm.studies.sequences (sequence self-attention machinery of chapter 8)."""

from __future__ import annotations

import random
from typing import Callable

import torch

import attnsvm as A
from fuzz_inputs import NON_FINITE, NON_NUMERIC, checked


def _instance():
    X, Y, v = A.studies.random_sequences(1, 3, 3, 2, A.set_seed(0))
    return X, Y, v, A.Problem.sequence(X, Y, v, causal=True)


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    out = []
    add = lambda entry, kind, what, thunk: out.append((entry, kind, what, thunk))  # noqa: E731
    X, Y, v, P = _instance()
    W = torch.zeros(2, 3, 3, dtype=torch.float64)
    for bad in NON_NUMERIC:
        add("random_sequences", "type", f"n={bad!r}", lambda b=bad: A.studies.random_sequences(b, 3, 3, 2, A.set_seed(0)))
        add("random_sequences", "type", f"generator={bad!r}", lambda b=bad: A.studies.random_sequences(1, 3, 3, 2, b))
        add("self_attention_reference", "type", f"W={bad!r}",
            lambda b=bad: A.studies.self_attention_reference(b, X[0], Y[0], v[0], True))
        add("cover_fraction", "type", f"T={bad!r}", lambda b=bad: A.studies.cover_fraction(b, 2))
        add("separable_through_origin", "type", f"points={bad!r}",
            lambda b=bad: A.studies.separable_through_origin(b, [1.0, -1.0]))
        add("causal_pairs_separable", "type", f"selection={bad!r}", lambda b=bad: A.studies.causal_pairs_separable(X[0], b))
        add("smallest_logit_gaps", "type", f"problem={bad!r}", lambda b=bad: A.studies.smallest_logit_gaps(W, b))
        add("ngd_until_gap", "type", f"problem={bad!r}", lambda b=bad: A.studies.ngd_until_gap(b, 10, 0.5, 10.0, 5))
        add("ngd_until_gap", "type", f"lr={bad!r}", lambda b=bad: A.studies.ngd_until_gap(P, 10, b, 10.0, 5))
        add("att_svm_feasible", "type", f"problem={bad!r}", lambda b=bad: A.att_svm_feasible(b))
    for bad in NON_FINITE:
        add("self_attention_reference", "value", f"X with {bad}",
            lambda b=bad: A.studies.self_attention_reference(torch.eye(3), torch.full((1, 3, 3), b), Y[0], v[0], False))
        add("separable_through_origin", "value", f"points with {bad}",
            lambda b=bad: A.studies.separable_through_origin([[b, 0.0], [1.0, 1.0]], [1.0, -1.0]))
        add("smallest_logit_gaps", "value", f"W with {bad}", lambda b=bad: A.studies.smallest_logit_gaps(torch.full((2, 3, 3), b), P))
        add("ngd_until_gap", "value", f"gap_stop={bad}", lambda b=bad: A.studies.ngd_until_gap(P, 10, 0.5, b, 5))
        add("causal_pairs_separable", "value", f"X with {bad}",
            lambda b=bad: A.studies.causal_pairs_separable(torch.full((1, 3, 3), b), torch.zeros(1, 3, dtype=torch.long)))
    add("random_sequences", "value", "n = 0", lambda: A.studies.random_sequences(0, 3, 3, 2, A.set_seed(0)))
    add("random_sequences", "value", "keep > trials", lambda: A.studies.random_sequences(1, 3, 3, 2, A.set_seed(0), keep=3))
    add("random_sequences", "value", "T as float", lambda: A.studies.random_sequences(1, 3.0, 3, 2, A.set_seed(0)))
    add("self_attention_reference", "value", "W of the wrong shape",
        lambda: A.studies.self_attention_reference(torch.eye(2), X[0], Y[0], v[0], True))
    add("self_attention_reference", "value", "Y of the wrong shape",
        lambda: A.studies.self_attention_reference(torch.eye(3), X[0], Y[0][:, :2], v[0], True))
    add("cover_fraction", "value", "d = 0", lambda: A.studies.cover_fraction(4, 0))
    add("cover_fraction", "value", "T negative", lambda: A.studies.cover_fraction(-1, 2))
    add("separable_through_origin", "value", "labels of the wrong length",
        lambda: A.studies.separable_through_origin([[1.0, 0.0], [0.0, 1.0]], [1.0]))
    add("separable_through_origin", "value", "1-D points", lambda: A.studies.separable_through_origin([1.0, 2.0], [1.0, -1.0]))
    add("causal_pairs_separable", "value", "float selection", lambda: A.studies.causal_pairs_separable(X[0], torch.zeros(1, 3)))
    add("causal_pairs_separable", "value", "selection of the wrong shape",
        lambda: A.studies.causal_pairs_separable(X[0], torch.zeros(1, 2, dtype=torch.long)))
    add("smallest_logit_gaps", "value", "W of the wrong shape", lambda: A.studies.smallest_logit_gaps(torch.zeros(3, 3), P))
    add("smallest_logit_gaps", "value", "problem without trials",
        lambda: A.studies.smallest_logit_gaps(torch.zeros(1, 3, 3), P.trial(0)))
    add("ngd_until_gap", "value", "steps not a multiple of chunk", lambda: A.studies.ngd_until_gap(P, 10, 0.5, 10.0, 3))
    add("ngd_until_gap", "value", "gap_stop past the float64 limit", lambda: A.studies.ngd_until_gap(P, 10, 0.5, 800.0, 5))
    add("ngd_until_gap", "value", "steps 0", lambda: A.studies.ngd_until_gap(P, 0, 0.5, 10.0, 5))
    add("ngd_until_gap", "value", "negative lr", lambda: A.studies.ngd_until_gap(P, 10, -0.5, 10.0, 5))
    add("ngd_until_gap", "value", "problem without trials", lambda: A.studies.ngd_until_gap(P.trial(0), 10, 0.5, 10.0, 5))
    R = A.random_problem(2, 3, 2, trials=2, generator=A.set_seed(0))
    Q2 = A.Problem(R.X[None], R.Y[None], R.Z[None], R.v[None])
    add("att_svm_feasible", "value", "problem with two trials dimensions", lambda: A.att_svm_feasible(Q2))
    add("att_svm_feasible", "value", "alpha of the wrong shape", lambda: A.att_svm_feasible(P, P.opt[:, :1]))
    add("att_svm_feasible", "value", "alpha out of range", lambda: A.att_svm_feasible(P.trial(0), P.opt[0] + P.T))
    add("att_svm_feasible", "type", "float alpha", lambda: A.att_svm_feasible(P.trial(0), P.opt[0].double()))
    add("att_svm_feasible", "type", "a tensor for the problem", lambda: A.att_svm_feasible(P.X))
    add("separable_through_origin", "value", "labels 0/1", lambda: A.studies.separable_through_origin([[1.0, 0.0]], [0.0]))
    add("separable_through_origin", "value", "no points", lambda: A.studies.separable_through_origin(torch.zeros(0, 2), torch.zeros(0)))
    add("separable_through_origin", "value", "batched labels of the wrong shape",
        lambda: A.studies.separable_through_origin(torch.ones(3, 2, 2), torch.ones(2, 2)))
    add("causal_pairs_separable", "value", "batched selection of the wrong shape",
        lambda: A.studies.causal_pairs_separable(X, torch.zeros(2, 1, 2, dtype=torch.long)))
    add("separable_through_origin", "correct", "a batch of one separable and one blocked set", checked(
        lambda: A.studies.separable_through_origin(torch.tensor([[[1.0, 0.0], [-1.0, 0.0]], [[1.0, 0.0], [2.0, 0.0]]]),
                                           torch.tensor([[1.0, -1.0], [1.0, -1.0]])),
        lambda r: r.tolist() == [True, False]))
    add("cover_fraction", "correct", "T <= d is always separable", checked(
        lambda: A.studies.cover_fraction(3, 5), lambda r: r == 1.0))
    rng.random()
    return out
