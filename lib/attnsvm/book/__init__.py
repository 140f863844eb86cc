"""The book's page machinery: claims and their reproduction status, tables, intervals, the scale
switch and the plotting style.

- ``report``: :func:`claim` (one reproduction claim, glued into the report), tables, shares,
  Wilson intervals, tolerances.
- ``scale``: the one scale switch (``ATTNSVM_SCALE``: the paper's scale, or ``quick``).
- ``plot``: the book's figure style and plotting helpers (needs matplotlib; import it explicitly,
  ``import attnsvm.book.plot``).

Layering: may import :mod:`attnsvm.model`; never :mod:`attnsvm.studies` or :mod:`attnsvm.maxmargin`.
"""

from .report import KINDS_OF_CLAIM, claim, format_share, format_table, proportion_interval, within
from .scale import at_scale, scale
__all__ = [
    "KINDS_OF_CLAIM", "claim", "format_share", "format_table", "proportion_interval", "within",
    "at_scale", "scale",
]
