"""Print the one-page HTML book to PDF with headless Chromium (``make pdf``).

    python tools/print_pdf.py [--chromium PATH] _build/singlehtml/index.html _build/pdf/attnsvm.pdf

``make pdf`` first builds the whole book as one HTML page (``jupyter-book build --builder
singlehtml``, chapters executed as in ``make book``), then calls this script. Chromium loads the
page from disk, lets MathJax typeset every formula (it renders asynchronously: the page is given a
virtual-time budget, so printing waits until its scripts have finished) and prints it with the
book's print stylesheet (book/_static/print.css: code wraps, no navigation). Needs no network and
no TeX.

A contents page with page numbers needs the page numbers first: the book is printed once, the
chapters and sections are read from that PDF's bookmark outline (with pypdf), and it is printed
again with the contents inserted after the cover (at the mark ``<!-- print-contents -->`` that
book/_ext/singlehtml_book.py leaves there), every entry's page shifted by the contents' own length
(a third print if the first guess of that length was wrong).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "chrome")
INSTALL_HINT = ("install Chromium (Debian/Ubuntu: `sudo apt-get install chromium`; macOS: install "
                "Google Chrome) or name the browser: `make pdf CHROMIUM=/path/to/chrome`")


def find_chromium(name: str | None = None) -> str | None:
    for candidate in ([name] if name else CANDIDATES):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def chromium_command(chromium: str, html: Path, pdf: Path, profile: Path, budget_ms: int) -> list[str]:
    return [
        chromium,
        "--headless",
        # a container or CI runner: no sandbox, no GPU, no first-run, update or sync traffic
        "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-extensions",
        f"--user-data-dir={profile}",
        # the page loads MathJax's components and fonts from the book's own _static/ folder
        "--allow-file-access-from-files",
        # MathJax typesets asynchronously: run the page's scripts and layout to the end first
        "--run-all-compositor-stages-before-draw",
        f"--virtual-time-budget={budget_ms}",
        "--no-pdf-header-footer",
        "--generate-pdf-document-outline",
        f"--print-to-pdf={pdf}",
        html.resolve().as_uri(),
    ]


PAPER = {"letter": "letter", "a4": "A4"}
CONTENTS_MARK = "<!-- print-contents -->"


def with_paper(html: Path, paper: str, contents: str = "") -> Path:
    """A copy of the page beside it (so that its relative links still resolve) whose first style
    sets the paper size, with ``contents`` at the contents mark; the caller deletes it."""
    text = html.read_text(encoding="utf-8")
    style = f"<style>@page {{ size: {PAPER[paper]}; }}</style>"
    head = text.find("<head>")
    if head < 0:
        raise ValueError(f"{html}: no <head> to put the paper size in")
    text = text[:head + 6] + style + text[head + 6:]
    if contents:
        text = text.replace(CONTENTS_MARK, contents, 1)
    copy = html.with_name(f".{html.stem}-{paper}{html.suffix}")
    copy.write_text(text, encoding="utf-8")
    return copy


def outline(pdf: Path, max_depth: int = 1) -> tuple[list[tuple[int, str, int]], int]:
    """``(depth, title, page)`` of the PDF's bookmarks down to ``max_depth`` (pages from 1; those on
    the cover left out), and its number of pages."""
    import pypdf

    reader = pypdf.PdfReader(str(pdf))
    entries: list[tuple[int, str, int]] = []

    def walk(items, depth):
        for item in items:
            if isinstance(item, list):
                if depth < max_depth:
                    walk(item, depth + 1)
                continue
            page = reader.get_destination_page_number(item) + 1
            title = " ".join(item.title.split())
            half = len(title) // 2                   # Chromium doubles some headings' text ("MapMap")
            if len(title) % 2 == 0 and title[:half] == title[half:]:
                title = title[:half]
            if page > 1 and title:
                entries.append((depth, title, page))

    walk(reader.outline, 0)
    return entries, len(reader.pages)


def contents_html(entries: list[tuple[int, str, int]], shift: int) -> str:
    """The contents page: each entry with its page number plus ``shift`` (the contents' length)."""
    import html

    rows = "\n".join(f'<li class="print-contents-{min(depth, 1)}"><span>{html.escape(title)}</span>'
                      f"<span>{page + shift}</span></li>" for depth, title, page in entries)
    return f'<div class="print-contents"><p class="print-contents-title">Contents</p><ul>\n{rows}\n</ul></div>'


def print_once(chromium: str, page: Path, pdf: Path, budget_ms: int, timeout: int) -> str | None:
    """Print ``page`` to ``pdf``; None if it worked, else why not."""
    with tempfile.TemporaryDirectory(prefix="attnsvm-chromium-") as profile:
        command = chromium_command(chromium, page, pdf, Path(profile), budget_ms)
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"{chromium} did not finish within {timeout} s"
    if run.returncode != 0 or not pdf.is_file() or pdf.read_bytes()[:5] != b"%PDF-":
        return f"{chromium} did not write a PDF (exit status {run.returncode}):\n{run.stderr[-3000:]}"
    return None


def print_book(chromium: str, html: Path, pdf: Path, paper: str, budget_ms: int, timeout: int) -> str | None:
    """Print the book with a contents page (see the module's docstring); None if it worked."""
    page = with_paper(html, paper)
    try:
        failure = print_once(chromium, page, pdf, budget_ms, timeout)
        if failure or CONTENTS_MARK not in html.read_text(encoding="utf-8"):
            return failure
        entries, pages = outline(pdf)
        if not entries:
            return None
        shift = 1 + len(entries) // 45                    # a guess of the contents' length
        for _ in range(3):
            page.unlink(missing_ok=True)
            page = with_paper(html, paper, contents_html(entries, shift))
            failure = print_once(chromium, page, pdf, budget_ms, timeout)
            if failure:
                return failure
            length = outline(pdf)[1] - pages
            if length == shift:
                return None
            shift = length
        return f"the contents page did not settle at a length (last {shift} pages)"
    finally:
        page.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", type=Path, help="the one-page HTML book (singlehtml index.html)")
    parser.add_argument("pdf", type=Path, help="the PDF to write")
    parser.add_argument("--chromium", default=None,
                        help="Chromium or Chrome executable (default: the first of "
                             f"{', '.join(CANDIDATES)} on PATH)")
    parser.add_argument("--paper", choices=sorted(PAPER), default="letter",
                        help="paper size (default: letter; `make pdf PAPER=a4`)")
    parser.add_argument("--budget-ms", type=int, default=120_000,
                        help="virtual time the page gets to finish its scripts (default: 120000)")
    parser.add_argument("--timeout", type=int, default=900, help="wall-clock limit in seconds")
    args = parser.parse_args(argv)

    chromium = find_chromium(args.chromium)
    if chromium is None:
        print(f"print_pdf: Chromium not found ({args.chromium or ', '.join(CANDIDATES)}); it prints "
              f"the book to PDF: {INSTALL_HINT}", file=sys.stderr)
        return 2
    if not args.html.is_file():
        print(f"print_pdf: {args.html} does not exist; build the one-page book first "
              "(`make pdf` does)", file=sys.stderr)
        return 2

    args.pdf.parent.mkdir(parents=True, exist_ok=True)
    partial = args.pdf.with_suffix(".partial.pdf")
    partial.unlink(missing_ok=True)
    failure = print_book(chromium, args.html, partial, args.paper, args.budget_ms, args.timeout)
    if failure:
        print(f"print_pdf: {failure}", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return 1
    partial.replace(args.pdf)
    print(f"PDF: {args.pdf} ({args.pdf.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
