"""cvxpy, imported on first use (``from .lazy_cvxpy import cp``).

Most chapters never call a conic solver (the Frobenius SVMs are solved exactly), and importing
cvxpy, with the SciPy modules it pulls in, costs over a second per process. ``cp`` stands for the
module: its first attribute lookup imports cvxpy, and every lookup is cvxpy's own.
"""

from __future__ import annotations

import importlib
from typing import Any


class _LazyModule:
    """A module imported at its first attribute lookup."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)


cp: Any = _LazyModule("cvxpy")
