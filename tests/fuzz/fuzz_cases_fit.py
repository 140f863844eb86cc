"""Fuzz cases for attnsvm.studies.fit (training loops and measurements of chapters 9 and 10): bad
problems, parameters, selections, probabilities and settings must be refused with
ValueError/TypeError by the library."""

from __future__ import annotations

import random
from typing import Callable

import torch

import attnsvm as A
from fuzz_inputs import NON_FINITE, NON_NUMERIC, checked

F64 = torch.float64


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    P = A.random_problem(2, 3, 4, trials=2, generator=A.set_seed(rng.randrange(100)))
    P1 = P.trial(0)
    zeros = torch.zeros(2, 4, 4, dtype=F64)
    logits = torch.randn(2, 3, generator=A.set_seed(1), dtype=F64)
    out: list[tuple[str, str, str, Callable]] = []
    for value in NON_FINITE:
        bad = logits.clone()
        bad[rng.randrange(2), rng.randrange(3)] = value
        out.append(("logit_gaps", "non-finite", f"logits with {value}", lambda bad=bad: A.studies.logit_gaps(bad, [0, 1])))
        W = zeros.clone()
        W[0, 0, 0] = value
        out.append(("smallest_margin", "non-finite", f"W with {value}",
                    lambda W=W: A.studies.smallest_margin(W, P, P.opt)))
        out.append(("attention_entropy", "non-finite", f"probabilities with {value}",
                    lambda value=value: A.studies.attention_entropy(torch.tensor([0.5, value], dtype=F64))))
        out.append(("train_until_gap", "non-finite", f"gap_stop = {value}",
                    lambda value=value: A.studies.train_until_gap(A.WAttention, [zeros], P, "ngd", 0.1, 10, gap_stop=value)))
    for value in NON_NUMERIC:
        out.append(("logit_gaps", "non-numeric", f"alpha = {value!r}", lambda value=value: A.studies.logit_gaps(logits, value)))
        out.append(("attention_entropy", "non-numeric", f"probabilities = {value!r}",
                    lambda value=value: A.studies.attention_entropy(value)))
        out.append(("train_recorded", "non-numeric", f"steps = {value!r}",
                    lambda value=value: A.studies.train_recorded(A.WAttention.zeros(4), P1, value)))
    out += [
        ("logit_gaps", "shape", "alpha of the wrong length", lambda: A.studies.logit_gaps(logits, [0, 1, 2])),
        ("logit_gaps", "range", "alpha out of range", lambda: A.studies.logit_gaps(logits, [0, 3])),
        ("logit_gaps", "shape", "one token per example", lambda: A.studies.logit_gaps(torch.zeros(2, 1, dtype=F64), [0, 0])),
        ("logit_gaps", "valid", "gaps of a small example",
         checked(lambda: A.studies.logit_gaps(torch.tensor([[1.0, 3.0, 0.0]], dtype=F64), [1]),
                 lambda g: g.tolist() == [[2.0, float("inf"), 3.0]])),
        ("smallest_margin", "type", "a tensor instead of a Problem", lambda: A.studies.smallest_margin(zeros, P.X, P.opt)),
        ("smallest_margin", "shape", "W without the trials dimension", lambda: A.studies.smallest_margin(zeros[0], P, P.opt)),
        ("smallest_margin", "shape", "a problem without trials", lambda: A.studies.smallest_margin(zeros, P1, P1.opt)),
        ("smallest_margin", "shape", "alpha for one trial only", lambda: A.studies.smallest_margin(zeros, P, P.opt[0])),
        ("train_until_gap", "type", "make is not callable",
         lambda: A.studies.train_until_gap(3, [zeros], P, "ngd", 0.1, 10)),
        ("train_until_gap", "type", "problem is a tensor",
         lambda: A.studies.train_until_gap(A.WAttention, [zeros], P.X, "ngd", 0.1, 10)),
        ("train_until_gap", "shape", "parameters without the trials first",
         lambda: A.studies.train_until_gap(A.WAttention, [zeros[0]], P, "ngd", 0.1, 10)),
        ("train_until_gap", "shape", "a problem without trials",
         lambda: A.studies.train_until_gap(A.WAttention, [zeros[:1]], P1, "ngd", 0.1, 10)),
        ("train_until_gap", "count", "max_steps = 0",
         lambda: A.studies.train_until_gap(A.WAttention, [zeros], P, "ngd", 0.1, 0)),
        ("train_until_gap", "count", "chunk = 0",
         lambda: A.studies.train_until_gap(A.WAttention, [zeros], P, "ngd", 0.1, 10, chunk=0)),
        ("train_until_gap", "value", "negative gap_stop",
         lambda: A.studies.train_until_gap(A.WAttention, [zeros], P, "ngd", 0.1, 10, gap_stop=-1.0)),
        ("train_until_gap", "method", "method 'adam'",
         lambda: A.studies.train_until_gap(A.WAttention, [zeros], P, "adam", 0.1, 10)),
        ("attention_entropy", "value", "rows that do not sum to 1",
         lambda: A.studies.attention_entropy(torch.tensor([0.5, 0.6], dtype=F64))),
        ("attention_entropy", "value", "a negative probability",
         lambda: A.studies.attention_entropy(torch.tensor([1.5, -0.5], dtype=F64))),
        ("attention_entropy", "shape", "a single token", lambda: A.studies.attention_entropy(torch.ones(3, 1, dtype=F64))),
        ("accuracy", "type", "a tensor instead of a Problem", lambda: A.studies.accuracy(A.WAttention.zeros(4), P1.X)),
        ("accuracy", "type", "a tensor instead of an attention", lambda: A.studies.accuracy(zeros, P)),
        ("train_recorded", "type", "an MLP head", lambda: A.studies.train_recorded(A.WAttention.zeros(4), P1, 5,
                                                                            head=A.MLPHead(torch.ones(4, 3, dtype=F64)))),
        ("train_recorded", "type", "test is a tensor",
         lambda: A.studies.train_recorded(A.WAttention.zeros(4), P1, 5, test=P1.X)),
        ("train_recorded", "shape", "test of another dimension",
         lambda: A.studies.train_recorded(A.WAttention.zeros(4), P1, 5, test=A.random_problem(2, 3, 5))),
        ("train_recorded", "count", "log_every = 0",
         lambda: A.studies.train_recorded(A.WAttention.zeros(4), P1, 5, log_every=0)),
        ("train_recorded", "value", "negative lr", lambda: A.studies.train_recorded(A.WAttention.zeros(4), P1, 5, -0.1)),
        ("margin_ratio", "zero", "W = 0", lambda: A.studies.margin_ratio(zeros, P, P.opt, 2, A.studies.NormSVMCache())),
        ("margin_ratio", "type", "a dict instead of a cache",
         lambda: A.studies.margin_ratio(zeros + 1, P, P.opt, 2, {})),
        ("margin_ratio", "type", "where of floats",
         lambda: A.studies.margin_ratio(zeros + 1, P, P.opt, 2, A.studies.NormSVMCache(), where=torch.ones(2))),
        ("margin_ratio", "shape", "where of the wrong length",
         lambda: A.studies.margin_ratio(zeros + 1, P, P.opt, 2, A.studies.NormSVMCache(), where=torch.ones(3, dtype=torch.bool))),
        ("margin_ratio", "norm", "norm 'max'", lambda: A.studies.margin_ratio(zeros + 1, P, P.opt, "max", A.studies.NormSVMCache())),
        ("margin_ratio", "shape", "W without trials", lambda: A.studies.margin_ratio(zeros[0] + 1, P, P.opt, 2, A.studies.NormSVMCache())),
        ("NormSVMCache.solve", "type", "a tensor instead of a Problem",
         lambda: A.studies.NormSVMCache().solve(P.X, 0, P.opt[0], 2)),
        ("NormSVMCache.solve", "range", "trial out of range", lambda: A.studies.NormSVMCache().solve(P, 5, P.opt[0], 2)),
        ("NormSVMCache.solve", "shape", "a problem without trials", lambda: A.studies.NormSVMCache().solve(P1, 0, P1.opt, 2)),
        ("NormSVMCache.solve", "norm", "norm 'frobenius'", lambda: A.studies.NormSVMCache().solve(P, 0, P.opt[0], "frobenius")),
        ("NormSVMCache.solve", "count", "trial = -1", lambda: A.studies.NormSVMCache().solve(P, -1, P.opt[0], 2)),
    ]
    return out
