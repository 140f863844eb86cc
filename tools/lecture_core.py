"""Each chapter's lecture core and lab: where the page splits, and how big each part is.

Every chapter has the same order of sections (book intro, "Teaching from this book"): *What you
will learn*, the setup cell, the **lecture core** (the theorem boxes, one experiment and the checks
that carry the claim), *What to take away*, then the **lab**, which starts at the label
``(chNN-lab)=`` before its heading ``## Lab: ...``, and the exercises. This module finds the split
and measures both parts: words of prose (the Markdown, code cells excluded), code cells, and the
run time of those cells in the build's execution cache (:mod:`notebook_cache`). The Build status
page prints the table; ``tests/site/test_lecture_core.py`` holds the layout.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import notebook_cache

LAB_LABEL = re.compile(r"^\((ch\d+b?)-lab\)=\s*$", re.MULTILINE)
HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$", re.MULTILINE)
# what is not prose: MyST target labels, comments, directive option lines, fences
NOT_PROSE = re.compile(r"^\s*(\([\w-]+\)=|%.*|:[\w-]+:.*|```.*|<!--.*-->)\s*$", re.MULTILINE)


def chapter_id(path: Path) -> str | None:
    """``ch04`` for ``book/ch04_gd_convergence.md``, ``ch05b`` for ch05b; None for other pages."""
    match = re.match(r"(ch\d+b?)_", path.name)
    return match.group(1) if match else None


def words(markdown: str) -> int:
    """Words of prose in a Markdown cell: labels, comments, options and fences left out; a glued
    number or a role counts as one word."""
    return len(re.sub(r"^#+\s", "", NOT_PROSE.sub("", markdown), flags=re.MULTILINE).split())


def split(path: Path) -> tuple[list, list, str]:
    """The chapter's cells before and after its lab label, and the label's chapter id. Raises
    ``ValueError`` if the page has no ``(chNN-lab)=`` label, more than one, or one with another
    chapter's id."""
    notebook = notebook_cache.read_chapter(path)
    expected = chapter_id(path)
    core, lab, found = [], [], []
    for cell in notebook.cells:
        matches = list(LAB_LABEL.finditer(cell.source)) if cell.cell_type == "markdown" else []
        found += [m.group(1) for m in matches]
        if len(found) > 1:
            raise ValueError(f"{path.name}: more than one lab label ({found})")
        if matches and not lab:
            before, after = cell.source[:matches[0].start()], cell.source[matches[0].start():]
            core.append({"cell_type": "markdown", "source": before})
            lab.append({"cell_type": "markdown", "source": after})
        else:
            (lab if found else core).append(cell)
    if not found:
        raise ValueError(f"{path.name}: no lab label: a line ({expected}-lab)= before the heading "
                         f"'## Lab: ...' (see tools/lecture_core.py)")
    if found[0] != expected:
        raise ValueError(f"{path.name}: the lab label names {found[0]}, not {expected}")
    return core, lab, found[0]


def headings(cells: Sequence) -> list[tuple[int, str]]:
    """The (level, title) of every Markdown heading in ``cells``, in order."""
    return [(len(m.group(1)), m.group(2)) for cell in cells if cell["cell_type"] == "markdown"
            for m in HEADING.finditer(cell["source"])]


def measure(path: Path) -> dict:
    """Words, code cells and cached seconds of the core and of the rest of the page (the lab and
    the exercises); seconds are None if the chapter is not in the execution cache."""
    core, lab, _ = split(path)
    seconds = _cell_seconds(path)
    n_core = sum(cell["cell_type"] == "code" for cell in core)
    result = {"chapter": path.stem}
    for name, cells, times in (("core", core, seconds[:n_core] if seconds else None),
                               ("lab", lab, seconds[n_core:] if seconds else None)):
        result[f"{name}_words"] = sum(words(c["source"]) for c in cells if c["cell_type"] == "markdown")
        result[f"{name}_cells"] = sum(c["cell_type"] == "code" for c in cells)
        result[f"{name}_seconds"] = None if times is None else float(sum(times))
    return result


def _cell_seconds(path: Path) -> list[float] | None:
    with notebook_cache.locked_cache(clear_stale=False) as cache:
        record = None if cache is None else notebook_cache.cached_record(cache, notebook_cache.read_chapter(path))
        return None if record is None else record.data.get("cell_seconds")


def chapters(root: Path = notebook_cache.ROOT) -> list[Path]:
    """The book's chapters (pages named ``chNN_...``), in reading order."""
    return [p for p in notebook_cache.book_chapters(root) if chapter_id(p)]
