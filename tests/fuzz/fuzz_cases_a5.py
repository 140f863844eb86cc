"""Fuzz cases for attnsvm.studies.a5 (paper A's rank study): bad settings, counts and worker numbers."""

from __future__ import annotations

import random
from typing import Callable

from fuzz_inputs import NON_FINITE, NON_NUMERIC

import attnsvm as A

# constants and the row the study builds (no input of their own)
EXEMPT = {"A5_D", "A5_INSTANCES", "A5_SETTINGS", "RankRow"}


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    entry = "a5 rank study"
    found = []
    for bad in [0, -3, 2.5, True, 101] + NON_FINITE + NON_NUMERIC:
        found.append((entry, "count", f"rank_rows count={bad!r}", lambda b=bad: A.studies.rank_rows(5, 5, 2, b)))
        found.append((entry, "count", f"a5_rank_study count={bad!r}",
                      lambda b=bad: A.studies.a5_rank_study(((5, 5),), (2,), b)))
    for bad in [(0, 5, 2), (5, 1, 2), (5, 5, 0), (5.0, 5, 2), (5, 5, -1), ("5", 5, 2), (5, 5, None)]:
        found.append((entry, "setting", f"a5_instances{bad!r}", lambda b=bad: A.studies.a5_instances(*b)))
        found.append((entry, "setting", f"rank_rows{bad!r}", lambda b=bad: A.studies.rank_rows(*b, 1)))
    for settings, dims in [((), (2,)), (((5, 5),), ()), (((5,),), (2,)), ((5, 5), (2,)),
                           (((5, 5),), (2.0,)), (((5, 5),), None), (None, (2,)), (((0, 5),), (2,))]:
        found.append((entry, "setting", f"a5_rank_study({settings!r}, {dims!r})",
                      lambda s=settings, d=dims: A.studies.a5_rank_study(s, d, 1)))
    for bad in [0, -1, 1.5, "many", None, True]:
        found.append((entry, "workers", f"a5_rank_study workers={bad!r}",
                      lambda b=bad: A.studies.a5_rank_study(((5, 5),), (2,), 1, workers=b)))
    return found
