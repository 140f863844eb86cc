"""Fuzz cases for attnsvm.book.report's format_share (a share with its Wilson interval, as text)."""

from __future__ import annotations

import random
from typing import Callable

from fuzz_inputs import NON_FINITE, NON_NUMERIC

import attnsvm as A


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    bad = [(-1, 5), (6, 5), (1, 0), (1.5, 4), (True, 4), (2, -3)] + [(x, 5) for x in NON_FINITE + NON_NUMERIC]
    return [("report", "count", f"format_share{args!r}", lambda a=args: A.book.format_share(*a)) for args in bad]
