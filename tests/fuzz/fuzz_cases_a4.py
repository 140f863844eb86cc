"""Fuzz cases for attnsvm.studies.a4's batched step budgets (a4_budgets): bad shapes, budgets, slices."""

from __future__ import annotations

import math
import random
from typing import Callable

from fuzz_inputs import NON_FINITE, NON_NUMERIC

import attnsvm as A


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    entry = "a4 step budgets"
    found = []
    for bad in [(), "20", [0], [2.5], [-1], None, 2000, [True]] + [[b] for b in NON_FINITE + NON_NUMERIC]:
        found.append((entry, "budgets", f"budgets={bad!r}",
                      lambda b=bad: A.studies.a4_budgets(2, 3, (2,), 2, drawn=4, budgets=b)))
    for ds in [(), "23", 2, (0,), (2.5,), (100,), None, (math.nan,)]:
        found.append((entry, "ds", f"ds={ds!r}", lambda x=ds: A.studies.a4_budgets(2, 3, x, 2, drawn=4, budgets=(2,))))
    for args, kw in [((0, 3), {}), ((2, 1), {}), ((2, 3), {"start": 2}), ((2, 3), {"drawn": 1}),
                     ((2, 3), {"init": "ones"}), ((2, 3), {"lr": 0.0}), ((2, 3), {"lr": math.inf}),
                     ((2.5, 3), {})]:
        found.append((entry, "argument", f"{args} {kw}",
                      lambda a=args, k=kw: A.studies.a4_budgets(*a, (2,), 2, **{"drawn": 4, "budgets": (2,), **k})))
    return found
