"""The book's one scale switch (the paper's scale by default).

Every experiment size in the book is written ``at_scale(paper=..., quick=...)``. The environment
variable ``ATTNSVM_SCALE`` picks the column: unset or ``paper`` gives the sizes of the papers'
experiments (what the website shows); ``quick`` gives smaller sizes for slow machines and for
development. The same claims are checked at both scales.
"""

from __future__ import annotations

import os
from typing import TypeVar

SCALES = ("paper", "quick")
ENV_VARIABLE = "ATTNSVM_SCALE"

Value = TypeVar("Value")


def scale() -> str:
    """The scale of this run: ``"paper"`` (default) or ``"quick"``, read from ``ATTNSVM_SCALE``."""
    value = os.environ.get(ENV_VARIABLE, "").strip().lower() or "paper"
    if value not in SCALES:
        raise ValueError(f"{ENV_VARIABLE}={os.environ[ENV_VARIABLE]!r} is not a scale; "
                         f"set it to one of {SCALES} (or leave it unset for 'paper')")
    return value


def at_scale(paper: Value, quick: Value) -> Value:
    """``paper`` at the paper's scale, ``quick`` at the quick one (see :func:`scale`)."""
    return paper if scale() == "paper" else quick
