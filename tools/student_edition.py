"""Student edition of the book: every chapter as a ``.ipynb`` with the exercise solutions removed.

    python tools/student_edition.py [--output DIR] [--keep-myst] [CHAPTER.md ...]   (``make student``)

A chapter is a MyST-Markdown text notebook (``book/chNN_*.md`` with a jupytext front matter); by
default every such chapter is converted, into ``_build/student/``. Each chapter is read with jupytext,
every solution is removed from its markdown cells and the notebook is written as ``.ipynb``; the
exercises, all other text and every code cell are kept. The Markdown is then written as plain
Markdown (``tools/plain_markdown.py``), so that the notebook reads as the book does in Jupyter,
Colab or VS Code: glued numbers become the values of the book's build (read from its execution
cache: ``make student`` executes the chapters it lacks first), references the titles of their
targets, theorem boxes and exercises quoted blocks. ``--keep-myst`` keeps the MyST markup instead
(for JupyterLab with the jupyterlab-myst extension; glued numbers then show only after the
notebook is run).

A solution is a sphinx-exercise directive written as a MyST fence, with backticks or colons::

    ```{solution} ex-label          ::::{solution} ex-label
    :class: dropdown                :class: dropdown
    ...                             ...
    ```                             ::::

The block ends where MyST ends it: at the first line made only of the opening fence character,
repeated at least as often as in the opener. So a solution fenced with four backticks may contain
```` ```python ```` blocks, and a ``::::`` solution may contain ``:::`` directives. Fences are
followed the same way everywhere: the body of another directive (an exercise, a proof, a note) is
searched for solutions, a code block's body is not (it may show directive syntax as an example).
Gated solutions (``{solution-start}`` ... ``{solution-end}``) are removed with everything between
their two markers, code cells included.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = ROOT / "_build" / "student"

# A fence opener: up to three spaces of indentation (more inside list items: any indentation is
# accepted), three or more backticks or colons, then the info string ("{name} argument" for a
# directive, a language or nothing for a code block).
_OPENER = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})(?P<info>.*)$")
_DIRECTIVE = re.compile(r"^\s*\{(?P<name>[^}\s]+)\}")
# Directives whose body is literal text, not MyST: never searched for solutions.
LITERAL_DIRECTIVES = {"code", "code-block", "sourcecode", "code-cell", "literalinclude", "math",
                      "raw", "eval-rst", "mermaid"}
SOLUTION = "solution"
GATED_START, GATED_END = "solution-start", "solution-end"


class StudentEditionError(ValueError):
    """A chapter whose solutions cannot be removed cleanly (e.g. a gated solution never closed)."""


def _opener(line: str) -> tuple[str, str | None] | None:
    """``(fence, directive name or None)`` if ``line`` opens a fence, else None."""
    match = _OPENER.match(line)
    if match is None:
        return None
    fence, info = match["fence"], match["info"]
    if fence[0] == "`" and "`" in info:  # CommonMark: a backtick fence's info has no backtick
        return None
    directive = _DIRECTIVE.match(info)
    return fence, (directive["name"] if directive else None)


def _is_closer(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def _block_end(lines: list[str], start: int, fence: str) -> tuple[int, bool]:
    """Index of the line that closes the fence opened at ``start`` and whether it was closed
    (an unclosed fence runs to the end of the cell, as in CommonMark)."""
    for j in range(start + 1, len(lines)):
        if _is_closer(lines[j], fence):
            return j, True
    return len(lines) - 1, False


def strip_solutions_from_lines(lines: list[str], gated: bool = False) -> tuple[list[str], bool, int]:
    """Remove the solution blocks from markdown ``lines``.

    ``gated`` says whether the text starts inside a gated solution (a ``{solution-start}`` seen in
    an earlier cell). Returns the kept lines, whether the text ends inside a gated solution, and
    the number of solutions removed.
    """
    kept: list[str] = []
    removed = 0
    i = 0
    while i < len(lines):
        opened = _opener(lines[i])
        if opened is None:
            if not gated:
                kept.append(lines[i])
            i += 1
            continue
        fence, name = opened
        end, closed = _block_end(lines, i, fence)
        if gated:  # inside a gated solution: drop whole blocks until its end marker
            gated = name != GATED_END
        elif name == SOLUTION:
            removed += 1
        elif name == GATED_START:
            removed += 1
            gated = True
        elif name is None or name in LITERAL_DIRECTIVES:
            kept.extend(lines[i:end + 1])
        else:  # another directive: its body is MyST and may hold solutions
            body_end = end if closed else end + 1
            body, body_gated, n = strip_solutions_from_lines(lines[i + 1:body_end])
            if body_gated:
                raise StudentEditionError(
                    f"a {{{GATED_START}}} inside the {{{name}}} directive at {lines[i].strip()!r} "
                    f"has no {{{GATED_END}}} in the same directive")
            kept.append(lines[i])
            kept.extend(body)
            if closed:
                kept.append(lines[end])
            removed += n
        i = end + 1
    return kept, gated, removed


def _tidy(lines: list[str]) -> str:
    """Join lines, with at most one blank line in a row where a block was cut out."""
    text = "\n".join(lines)
    text = re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", text)
    return text.strip("\n")


def strip_solutions(notebook: nbformat.NotebookNode) -> int:
    """Remove every solution from ``notebook`` in place; return how many were removed.

    Markdown cells lose their solution blocks (and a cell left empty is dropped); code and raw
    cells are kept unchanged, except the cells inside a gated solution, which are dropped.
    """
    cells = []
    removed = 0
    gated = False
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            if not gated:
                cells.append(cell)
            continue
        lines = cell.source.split("\n")
        kept, gated, n = strip_solutions_from_lines(lines, gated)
        if n == 0 and len(kept) == len(lines):
            cells.append(cell)
            continue
        removed += n
        cell.source = _tidy(kept)
        if cell.source.strip():
            cells.append(cell)
    if gated:
        raise StudentEditionError(f"a {{{GATED_START}}} has no {{{GATED_END}}}")
    notebook.cells = cells
    return removed


def is_chapter(path: Path) -> bool:
    """A text notebook: a front matter with a kernelspec (as the Makefile's CHAPTERS)."""
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return False
    front_matter = text.split("\n---", 1)[0]
    return re.search(r"^kernelspec:", front_matter, re.MULTILINE) is not None


# Appendix pages that are text notebooks with exercises, as the chapters.
APPENDICES = ("numerics.md",)


def default_chapters(book: Path = ROOT / "book") -> list[Path]:
    """Every chapter (book/ch*.md) and appendix notebook, in that order."""
    paths = [*sorted(book.glob("ch*.md")), *(book / name for name in APPENDICES)]
    return [path for path in paths if path.exists() and is_chapter(path)]


def render_plain(notebook: nbformat.NotebookNode, chapter: Path, targets=None) -> None:
    """Rewrite the Markdown cells of ``notebook`` (the chapter ``chapter``) as plain Markdown, with
    the glued values of the book's execution cache; a first cell says what the notebook is."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import notebook_cache
    import plain_markdown

    book = chapter.resolve().parent
    targets = targets or plain_markdown.Targets.of_book(book)
    pages: dict[str, dict] = {}

    def values(page: str, key: str) -> str:
        name = Path(page).stem if page else chapter.stem
        if name not in pages:
            data = notebook_cache.glued_data((book / f"{name}.md").resolve())
            if data is None:
                raise StudentEditionError(f"{name}.md is not in the book's execution cache, so its "
                                          "numbers are unknown: run `make book` (or `make student`, "
                                          "which executes the missing chapters) first")
            pages[name] = data
        return pages[name][key]

    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            try:
                cell.source = plain_markdown.render(cell.source, values, targets)
            except plain_markdown.PlainMarkdownError as error:
                raise StudentEditionError(str(error)) from None
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell(
        f"*Student edition of the chapter \"{targets.pages.get(chapter.stem, chapter.stem)}\" of the "
        "book attnsvm: the exercises without their solutions. The numbers in the text are those of "
        "the book's build; run the cells in order (Kernel, Restart and run all) to compute your own. "
        "Needs the attnsvm library: from the book's repository, `make setup`, then "
        "`.venv/bin/jupyter lab` in the folder of this notebook.*"))


def student_edition(chapter: Path, output: Path, plain: bool = True) -> tuple[Path, int]:
    """Write the student ``.ipynb`` of one chapter into ``output``; return its path and the number
    of solutions removed. ``plain``: Markdown rewritten as plain Markdown (:func:`render_plain`)."""
    notebook = jupytext.read(chapter, fmt="md:myst")
    removed = strip_solutions(notebook)
    if plain:
        render_plain(notebook, chapter)
    output.mkdir(parents=True, exist_ok=True)
    target = output / f"{chapter.stem}.ipynb"
    jupytext.write(notebook, target, fmt="ipynb")
    return target, removed


def write_index(output: Path, written: list[tuple[Path, str]]) -> Path:
    """An ``index.html`` in ``output`` linking each student notebook (``make book`` puts the
    edition on the website, under ``student/``)."""
    import html

    items = "\n".join(f'<li><a href="{html.escape(path.name)}" download>{html.escape(title)}</a> '
                      f"(<code>{html.escape(path.name)}</code>)</li>" for path, title in written)
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>attnsvm: student "
            "notebooks</title></head><body>\n<h1>attnsvm: the student notebooks</h1>\n<p>Every chapter "
            "as a Jupyter notebook with its exercises and without their solutions; the text is plain "
            "Markdown, with the numbers of this build of the book. To run them: clone the book's "
            "repository, <code>make setup</code>, put the notebooks in the repository's folder and "
            "open them with <code>.venv/bin/jupyter lab</code> (or in any Jupyter with the "
            f"<code>attnsvm</code> library installed).</p>\n<ul>\n{items}\n</ul>\n</body></html>\n")
    target = output / "index.html"
    target.write_text(page, encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", type=Path,
                        help="chapter text notebooks (default: every book/ch*.md and the appendices)")
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT,
                        help=f"folder for the .ipynb files (default: {DEFAULT_OUTPUT.relative_to(ROOT)})")
    parser.add_argument("--keep-myst", action="store_true",
                        help="keep the MyST markup (for JupyterLab with jupyterlab-myst) instead of "
                             "plain Markdown with the build's numbers")
    parser.add_argument("--index", action="store_true",
                        help="also write an index.html that links the notebooks (for the website)")
    args = parser.parse_args(argv)
    chapters = args.chapters or default_chapters()
    if not chapters:
        parser.error("no chapter found")
    written = []
    for chapter in chapters:
        if not is_chapter(chapter):
            parser.error(f"{chapter} is not a text notebook (no jupytext front matter with a kernelspec)")
        try:
            target, removed = student_edition(chapter, args.output, plain=not args.keep_myst)
        except StudentEditionError as error:
            print(f"{chapter}: {error}", file=sys.stderr)
            return 1
        print(f"{chapter}: {removed} solution(s) removed -> {target}")
        title = next((line[2:].strip() for line in chapter.read_text(encoding="utf-8").splitlines()
                      if line.startswith("# ")), chapter.stem)
        written.append((target, title))
    if args.index:
        print(f"index -> {write_index(args.output, written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
