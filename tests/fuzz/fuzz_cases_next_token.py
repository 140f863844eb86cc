"""Fuzz cases for attnsvm.maxmargin.next_token (next-token prediction with a linear decoder, ch08b):
the batched gradient descent. The other names of the module are fuzzed in fuzz_inputs.py."""

from __future__ import annotations

import random
from typing import Callable

import torch

import attnsvm as A
from fuzz_inputs import NON_FINITE, NON_NUMERIC, checked


def _data(V=3):
    P = torch.zeros(2, V, dtype=torch.float64)
    P[0, :2], P[1, 1:3] = 0.5, 0.5
    return A.maxmargin.ntp_data(torch.eye(2, dtype=torch.float64), P)


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    out = []
    add = lambda entry, kind, what, thunk: out.append((entry, kind, what, thunk))  # noqa: E731
    batch = A.maxmargin.ntp_gradient_descent_batch
    for bad in NON_NUMERIC:
        add("ntp_gradient_descent_batch", "type", f"datasets={bad!r}", lambda b=bad: batch(b, 5, 1.0, [5]))
        add("ntp_gradient_descent_batch", "type", f"lr={bad!r}", lambda b=bad: batch([_data()], 5, b, [5]))
        if bad is not None:                               # None: the default steps
            add("ntp_gradient_descent_batch", "type", f"log_steps={bad!r}",
                lambda b=bad: batch([_data()], 5, 1.0, b))
    for bad in NON_FINITE:
        add("ntp_gradient_descent_batch", "value", f"lr={bad}", lambda b=bad: batch([_data()], 5, b, [5]))
    add("ntp_gradient_descent_batch", "value", "empty list", lambda: batch([], 5, 1.0, [5]))
    add("ntp_gradient_descent_batch", "value", "a list of tensors", lambda: batch([torch.eye(2)], 5, 1.0, [5]))
    add("ntp_gradient_descent_batch", "value", "two shapes", lambda: batch([_data(), _data(4)], 5, 1.0, [5]))
    add("ntp_gradient_descent_batch", "value", "steps 0", lambda: batch([_data()], 0, 1.0, [0]))
    add("ntp_gradient_descent_batch", "value", "log step beyond steps", lambda: batch([_data()], 5, 1.0, [9]))
    add("ntp_gradient_descent_batch", "value", "float log steps", lambda: batch([_data()], 5, 1.0, [0.5]))
    add("ntp_gradient_descent_batch", "value", "empty log steps", lambda: batch([_data()], 5, 1.0, []))
    add("ntp_gradient_descent_batch", "correct", "two instances, one step", checked(
        lambda: batch([_data(), _data()], 1, 1.0, [0, 1]),
        lambda h: tuple(h.iterates.shape) == (2, 2, 3, 2) and bool(torch.isfinite(h.loss).all())))
    rng.random()
    return out
