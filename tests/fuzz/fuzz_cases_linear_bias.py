"""Fuzz cases for attnsvm.studies.linear_bias (the linear precursors of chapter 9): bad data, labels,
exponents, methods and step settings must be refused by the library with ValueError/TypeError."""

from __future__ import annotations

import math
import random
from typing import Callable

import torch

import attnsvm as A
from fuzz_inputs import NON_FINITE, NON_NUMERIC, checked

EXEMPT = {"LINEAR_METHODS", "LinearDescent", "LinearMaxMargin"}


def _data(seed: int = 0):
    X, y = A.studies.separable_data(4, 3, trials=2, generator=A.set_seed(seed))
    return X, y


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    X, y = _data(rng.randrange(100))
    X1, y1 = X[0], y[0]
    out: list[tuple[str, str, str, Callable]] = []
    for value in NON_FINITE:
        bad = X1.clone()
        bad[rng.randrange(4), rng.randrange(3)] = value
        out.append(("linear_max_margin", "non-finite", f"X with {value}",
                    lambda bad=bad: A.studies.linear_max_margin(bad, y1, 2)))
        out.append(("linear_descent", "non-finite", f"X with {value}",
                    lambda bad=bad: A.studies.linear_descent(bad, y1, "steepest", 2, 5, 0.1)))
        out.append(("linear_margin", "non-finite", f"w with {value}",
                    lambda value=value: A.studies.linear_margin(torch.full((3,), value), X1, y1, 2)))
        out.append(("linear_max_margin", "non-finite", f"p = {value}",
                    lambda value=value: A.studies.linear_max_margin(X1, y1, value) if not math.isinf(value) or value < 0
                    else A.studies.linear_max_margin(X1, torch.zeros(4), value)))
        out.append(("linear_descent", "non-finite", f"lr = {value}",
                    lambda value=value: A.studies.linear_descent(X, y, "mirror", 3, 5, value)))
    for value in NON_NUMERIC:
        out.append(("linear_max_margin", "non-numeric", f"X = {value!r}",
                    lambda value=value: A.studies.linear_max_margin(value, y1, 2)))
        out.append(("linear_descent", "non-numeric", f"p = {value!r}",
                    lambda value=value: A.studies.linear_descent(X, y, "steepest", value, 5, 0.1)))
        out.append(("separable_data", "non-numeric", f"n = {value!r}",
                    lambda value=value: A.studies.separable_data(value, 3)))
        out.append(("linear_margin", "non-numeric", f"p = {value!r}",
                    lambda value=value: A.studies.linear_margin(torch.ones(3), X1, y1, value)))
    for shape in [(4,), (4, 3, 2, 1), (0, 3), (4, 0)]:
        out.append(("linear_max_margin", "shape", f"X of shape {shape}",
                    lambda shape=shape: A.studies.linear_max_margin(torch.ones(shape), y1, 2)))
    out += [
        ("linear_max_margin", "labels", "labels in {0, 1}",
         lambda: A.studies.linear_max_margin(X1, (y1 > 0).double(), 2)),
        ("linear_max_margin", "labels", "one label too few", lambda: A.studies.linear_max_margin(X1, y1[:-1], 2)),
        ("linear_max_margin", "infeasible", "the same point with both labels",
         lambda: A.studies.linear_max_margin(torch.tensor([[1.0, 0.5], [1.0, 0.5]]), torch.tensor([1.0, -1.0]), 2)),
        ("linear_max_margin", "batch", "a batch of data sets", lambda: A.studies.linear_max_margin(X, y, 2)),
        ("linear_max_margin", "exponent", "p = 0.5", lambda: A.studies.linear_max_margin(X1, y1, 0.5)),
        ("linear_max_margin", "exponent", "p = 1.001 (outside the solvable range)",
         lambda: A.studies.linear_max_margin(X1, y1, 1.001)),
        ("linear_max_margin", "valid", "one point: the Hoelder solution",
         checked(lambda: A.studies.linear_max_margin(torch.tensor([[3.0, -4.0]]), torch.tensor([1.0]), 2),
                 lambda r: torch.allclose(r.w, torch.tensor([0.12, -0.16], dtype=torch.float64), atol=1e-7))),
        ("linear_descent", "method", "method 'adam'", lambda: A.studies.linear_descent(X, y, "adam", 2, 5, 0.1)),
        ("linear_descent", "loss", "loss 'hinge'",
         lambda: A.studies.linear_descent(X, y, "steepest", 2, 5, 0.1, loss="hinge")),
        ("linear_descent", "exponent", "p = 1 (no unique steepest step)",
         lambda: A.studies.linear_descent(X, y, "steepest", 1, 5, 0.1)),
        ("linear_descent", "exponent", "mirror descent with p = inf",
         lambda: A.studies.linear_descent(X, y, "mirror", math.inf, 5, 0.1)),
        ("linear_descent", "count", "0 steps", lambda: A.studies.linear_descent(X, y, "steepest", 2, 0, 0.1)),
        ("linear_descent", "count", "2.5 steps", lambda: A.studies.linear_descent(X, y, "steepest", 2, 2.5, 0.1)),
        ("linear_descent", "flag", "normalized = 'no'",
         lambda: A.studies.linear_descent(X, y, "steepest", 2, 5, 0.1, normalized="no")),
        ("linear_descent", "count", "log_every = 0",
         lambda: A.studies.linear_descent(X, y, "steepest", 2, 5, 0.1, log_every=0)),
        ("linear_descent", "overflow", "mirror p = 1.01 with a huge unnormalized step",
         lambda: A.studies.linear_descent(X, y, "mirror", 1.01, 3, 1e6, normalized=False)),
        ("linear_margin", "shape", "w of the wrong dimension", lambda: A.studies.linear_margin(torch.ones(4), X1, y1, 2)),
        ("linear_margin", "zero", "w = 0", lambda: A.studies.linear_margin(torch.zeros(3), X1, y1, 2)),
        ("linear_margin", "shape", "batched w for one data set",
         lambda: A.studies.linear_margin(torch.ones(2, 2, 3), X1, y1, 2)),
        ("separable_data", "count", "n = 0", lambda: A.studies.separable_data(0, 3)),
        ("separable_data", "margin", "margin 2 (no point is that far)", lambda: A.studies.separable_data(3, 3, margin=2.0)),
        ("separable_data", "generator", "a seed instead of a generator", lambda: A.studies.separable_data(3, 3, generator=0)),
    ]
    return out
