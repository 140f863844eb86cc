"""cvxpy, imported on first use (``from .lazy_cvxpy import cp``), and the cache of compiled
problems (:func:`compiled_per_thread`).

Most chapters never call a conic solver (the Frobenius SVMs are solved exactly), and importing
cvxpy, with the SciPy modules it pulls in, costs over a second per process. ``cp`` stands for the
module: its first attribute lookup imports cvxpy, and every lookup is cvxpy's own.
"""

from __future__ import annotations

import importlib
import threading
from functools import lru_cache, wraps
from typing import Any, Callable


class _LazyModule:
    """A module imported at its first attribute lookup."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        if attribute == "_name":             # not set yet (a copy or an unpickling in progress)
            raise AttributeError(attribute)
        return getattr(importlib.import_module(self._name), attribute)


cp: Any = _LazyModule("cvxpy")


def compiled_per_thread(maxsize: int) -> Callable[[Callable], Callable]:
    """``lru_cache(maxsize)`` with one cache per thread, for functions that build a cvxpy problem
    with Parameters: a compiled problem holds its parameters' values and its last solution, so
    two threads solving at once must not share one."""
    def decorate(build: Callable) -> Callable:
        local = threading.local()

        @wraps(build)
        def cached(*key):
            if not hasattr(local, "build"):
                local.build = lru_cache(maxsize)(build)
            return local.build(*key)
        return cached
    return decorate
