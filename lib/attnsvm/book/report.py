"""What the book's chapters share for showing results: plain-text tables and the measured claims
that feed the reproduction report (the back-matter page ``book/report.md``).

A chapter measures a claim of the papers (an id of the reproduction report, or one of its own numbered
checks) and calls :func:`claim`; the value and its status word are glued into the notebook with
MyST-NB and pasted into the report page with ``{glue:text}`chapter::key``, so the report shows
what this build computed, never a typed number.
"""

from __future__ import annotations

import math
import numbers
from typing import Sequence

# The status words of the reproduction report, one meaning each (the report's legend explains them):
KINDS_OF_CLAIM = {
    "reproduced": "our independent run meets a criterion, fixed before the run, against a "
                  "published value (a figure, table or theorem of the papers)",
    "equals the authors' code": "our library run equals the authors' public code on their "
                                "instance and protocol",
    "consistent": "a statistical comparison (both sides' intervals, the same denominator) cannot "
                  "tell our value from the reference",
    "fitted": "a free parameter was chosen to match the target (the row names it and how many "
              "candidates were tried)",
    "observed": "our own experiment, no published value to compare with",
}
DIFFERS = "differs"
STATUS = tuple(KINDS_OF_CLAIM) + (DIFFERS,)


def format_table(header: Sequence[object], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table with right-aligned columns (``print`` it). ``header`` is a list of column
    names, ``rows`` a list of rows (lists or tuples of cells, any printable values)."""
    if not isinstance(header, (list, tuple)) or not header:
        raise TypeError(f"header must be a non-empty list or tuple of column names, got "
                        f"{type(header).__name__}")
    if not isinstance(rows, (list, tuple)) or not all(isinstance(r, (list, tuple)) for r in rows):
        raise TypeError("rows must be a list of rows, each a list or tuple of cells (a string is "
                        "not a row)")
    cells = [[str(h) for h in header]] + [[str(c) for c in row] for row in rows]
    if any(len(row) != len(header) for row in cells):
        raise ValueError(f"every row needs {len(header)} cells, one per column of the header")
    widths = [max(len(row[j]) for row in cells) for j in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def within(value: float, target: float, tol: float) -> bool:
    """``|value - target| <= tol`` (False for NaN): the usual reproduction criterion."""
    for name, x in (("value", value), ("target", target), ("tol", tol)):
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {type(x).__name__} {x!r}")
    if not (tol >= 0 and math.isfinite(target)):
        raise ValueError(f"need a finite target and a tolerance >= 0, got {target!r} and {tol!r}")
    return bool(abs(float(value) - target) <= tol)


def proportion_interval(count: int, total: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a proportion ``count / total`` (95% for the default ``z``).

    Unlike ``p +- z sqrt(p(1-p)/N)`` it stays inside [0, 1] and is not empty at 0 or N successes.
    """
    if any(isinstance(x, bool) or not isinstance(x, numbers.Real) for x in (count, total)):
        raise TypeError(f"count and total must be whole numbers, got {count!r} and {total!r}")
    for x in (count, total):                 # integers of any size; floats only when whole
        if not isinstance(x, numbers.Integral) and not (math.isfinite(x) and float(x).is_integer()):
            raise ValueError(f"count and total must be whole numbers, got {count!r} and {total!r}")
    count, total = int(count), int(total)
    if total < 1 or not 0 <= count <= total:
        raise ValueError(f"need 0 <= count <= total and total >= 1, got {count} of {total}")
    if isinstance(z, bool) or not isinstance(z, numbers.Real) or not (z > 0 and math.isfinite(z)):
        raise ValueError(f"z must be a positive finite number (1.96 for 95%), got {z!r}")
    p = count / total
    inv = 1 / total                      # exact int division: no float overflow for totals of 1e400
    denominator = 1 + z * z * inv
    centre = (p + z * z * inv / 2) / denominator
    half = z * math.sqrt(inv) * math.sqrt(p * (1 - p) + z * z * inv / 4) / denominator  # no underflow
    low = 0.0 if count == 0 else max(0.0, centre - half)
    return low, 1.0 if count == total else min(1.0, centre + half)


def format_share(count: int, total: int) -> str:
    """``count / total`` with its 95% Wilson interval (:func:`proportion_interval`), as text:
    ``"0.250 [0.102, 0.495]"``."""
    low, high = proportion_interval(count, total)
    return f"{count / total:.3f} [{low:.3f}, {high:.3f}]"


def claim(key: str, value: float | str, ok: bool, fmt: str = ".4f", kind: str = "observed",
          note: str | None = None) -> str:
    """Glue a measured claim for the reproduction report and return its status word.

    Glues ``key`` (the value, formatted with ``fmt`` when it is a number) and ``key-status``: the
    ``kind`` of the comparison when ``ok``, else ``"differs"``. The kinds are the keys of
    :data:`KINDS_OF_CLAIM`: ``"reproduced"`` (a published value, criterion fixed beforehand),
    ``"equals the authors' code"``, ``"consistent"`` (statistical, both intervals), ``"fitted"`` (a
    free parameter chosen to match) and ``"observed"`` (the default: our own experiment, no
    published value). ``ok`` is the row's criterion (e.g. :func:`within` the paper's value); the
    chapter's ``assert`` cells, not this, decide whether the build passes. ``note`` (optional, e.g.
    which parameter was fitted among how many candidates) is glued as ``key-note``. A check that
    holds by construction is a sanity check, evidence of nothing: make it a claim only where its
    report row begins a cell with "sanity check" (the report counts such rows apart from the
    status words). Needs MyST-NB.
    """
    if not isinstance(kind, str) or kind not in KINDS_OF_CLAIM:
        raise ValueError(f"kind must be one of {sorted(KINDS_OF_CLAIM)}, got {kind!r} "
                         f"('{DIFFERS}' is not a kind: it is the status of a claim whose ok is False)")
    if note is not None and not isinstance(note, str):
        raise TypeError(f"note must be a string or None, got {type(note).__name__}")
    if not isinstance(key, str):
        raise TypeError(f"a claim key must be a string, got {type(key).__name__}")
    if getattr(ok, "dtype", None) is not None and str(ok.dtype) in ("bool", "torch.bool") \
            and getattr(ok, "ndim", 1) == 0:          # a NumPy or torch boolean scalar
        ok = bool(ok)
    if not isinstance(ok, bool):
        raise TypeError(f"ok must be True or False (e.g. within(value, target, tol)), got "
                        f"{type(ok).__name__} {ok!r}: a string such as 'no' would read as true")
    if isinstance(value, bool) or not isinstance(value, (str, numbers.Real)):
        raise TypeError(f"value must be a number or a string, got {type(value).__name__}")
    if not isinstance(fmt, str):
        raise TypeError(f"fmt must be a format string such as '.4f', got {type(fmt).__name__}")
    if not isinstance(value, str) and not math.isfinite(float(value)):
        raise ValueError(f"the value of claim {key!r} is {value!r}: a report value must be a finite "
                         "number, or a string that says why there is none (e.g. 'not defined: ...')")
    try:
        text = value if isinstance(value, str) else format(float(value), fmt)
    except ValueError:
        raise ValueError(f"fmt {fmt!r} is not a format for a number (try '.4f' or '.2e')") from None
    from myst_nb import glue

    if not key or any(c in key for c in ": `"):
        raise ValueError(f"a claim key must be non-empty, without ':', '`' or spaces; got {key!r}")
    status = kind if ok else DIFFERS
    glue(key, text, display=False)
    glue(f"{key}-status", status, display=False)
    if note is not None:
        glue(f"{key}-note", note, display=False)
    return status
