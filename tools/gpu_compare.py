"""The comparison behind tools/gpu_check.py: per-output relative differences, and the CPU's own
spread when every drawn input moves to a neighbouring float (the test that tells rounding amplified
by an ill-conditioned function from a device error, :func:`verdict`)."""

from __future__ import annotations

import math
from typing import Callable

import torch

SPREAD_RUNS = 16      # CPU runs with inputs moved by one ulp, for a function above the tolerance
SPREAD_FACTOR = 2.0   # a device difference within this multiple of the CPU's own spread is rounding


def flatten(out) -> list[torch.Tensor]:
    """Every tensor (or number) in a nested result, moved to the CPU."""
    if isinstance(out, torch.Tensor):
        return [out.detach().cpu()]
    if isinstance(out, (int, float, bool)):
        return [torch.tensor(out)]
    if isinstance(out, dict):
        return [t for key in sorted(out) for t in flatten(out[key])]
    if isinstance(out, (list, tuple)):
        return [t for item in out for t in flatten(item)]
    raise TypeError(f"cannot compare a {type(out).__name__}")


def output_differences(reference, other) -> list[float]:
    """Per output, ``max |a - b| / max |a|`` (0 when equal; integer and boolean outputs: the share
    of entries that differ; shapes that differ or a non-finite entry on one side only: inf)."""
    a_list, b_list = flatten(reference), flatten(other)
    if len(a_list) != len(b_list):
        return [math.inf] * max(len(a_list), 1)
    return [_difference(a, b) for a, b in zip(a_list, b_list)]


def _difference(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return math.inf
    if a.numel() == 0:
        return 0.0
    if not a.is_floating_point():
        return float((a != b).double().mean())
    a, b = a.double(), b.double()
    same_nonfinite = (a == b) | (torch.isnan(a) & torch.isnan(b))
    finite = torch.isfinite(a) & torch.isfinite(b)
    if bool((~finite & ~same_nonfinite).any()):
        return math.inf
    if not bool(finite.any()):
        return 0.0
    scale = float(a[finite].abs().max())
    gap = float((a[finite] - b[finite]).abs().max())
    return gap / scale if scale > 0 else (0.0 if gap == 0 else math.inf)


def relative_difference(reference, other) -> float:
    """The largest of :func:`output_differences`."""
    return max(output_differences(reference, other), default=0.0)


# When set (by :func:`cpu_spread`), every drawn real input (tokens, queries, heads, starts; not labels)
# moves to a neighbouring float: one unit in the last place up, down, or not at all, at random.
_JITTER: torch.Generator | None = None


def jitter(x: torch.Tensor) -> torch.Tensor:
    """``x`` as drawn, or moved to a neighbouring float while :func:`cpu_spread` runs."""
    if _JITTER is None:
        return x
    move = torch.randint(-1, 2, x.shape, generator=_JITTER)
    up, down = (torch.nextafter(x, torch.full_like(x, bound)) for bound in (math.inf, -math.inf))
    return torch.where(move > 0, up, torch.where(move < 0, down, x))


def cpu_spread(case: Callable[[str], object], reference) -> list[float]:
    """Per output, how far the CPU's own answer moves when every drawn input moves by one unit in
    the last place: the largest relative difference over ``SPREAD_RUNS`` seeded draws."""
    global _JITTER
    spreads = [0.0] * len(flatten(reference))
    try:
        for seed in range(SPREAD_RUNS):
            _JITTER = torch.Generator().manual_seed(seed)
            moved = output_differences(reference, case("cpu"))
            if len(moved) != len(spreads):
                return [math.inf] * len(spreads)
            spreads = [max(a, b) for a, b in zip(spreads, moved)]
    finally:
        _JITTER = None
    return spreads


def verdict(diffs: list[float], spreads: list[float], tol: float, exempt: bool = True) -> str:
    """``ok`` when every output is within ``tol``; ``ok (ill-conditioned)`` when each output above it
    is finite and within ``SPREAD_FACTOR`` x its own 1-ulp spread (finite too), and ``exempt``
    (gpu_check never exempts its short training runs); else flagged.

    Why this is rounding and not a device error: the device rounds differently in every operation,
    an error at least as large as moving each input by one ulp, so its answer is one draw from
    about the distribution the jittered CPU runs sample; the largest of ``SPREAD_RUNS`` draws
    estimates that distribution's upper range, and the factor allows for the device's extra
    rounding. It is a judgement, not a bound: an error smaller than the spread would pass, which is
    why the short runs (10 steps, before rounding grows) and every output the 1-ulp moves
    leave within ``tol`` (the loss histories, mostly) are still compared at ``tol``."""
    if all(d <= tol for d in diffs):
        return "ok"
    amplified = all(d <= tol or (exempt and math.isfinite(d) and math.isfinite(s)
                                 and d <= SPREAD_FACTOR * s) for d, s in zip(diffs, spreads))
    return "ok (ill-conditioned)" if amplified else f"ABOVE {tol:g}"
