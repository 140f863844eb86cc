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

Chromium makes the bookmarks from the page's headings: a heading's text is sometimes doubled
("MapMap"), loses its space where it wraps ("low-rankbias"), the book's parts (captions, not
headings) have none and neither has the root page's title. The bookmarks are rewritten (pypdf):
titles matched back to the page's headings, each part (book/_ext/singlehtml_book.py writes the
captions into the page) a bookmark at its first chapter's page holding its chapters, the root
page's sections under the book's title; the contents page lists the parts too.
"""

from __future__ import annotations

import argparse
import json
import re
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


def _key(text: str) -> str:
    """A heading's text without spaces or TeX delimiters: how a bookmark is matched to its heading
    (Chromium drops the space where a heading wraps: "low-rankbias")."""
    return re.sub(r"\\[()\[\]]|\s", "", text)


def heading_texts(html: Path) -> dict[str, str]:
    """The text of every heading of the page (h1 to h6), by ``_key``."""
    import html as html_lib

    known = {}
    for inner in re.findall(r"<h[1-6][^>]*>(.*?)</h[1-6]>", html.read_text(encoding="utf-8"), re.DOTALL):
        inner = re.sub(r'<a class="headerlink".*?</a>', "", inner, flags=re.DOTALL)
        text = " ".join(html_lib.unescape(re.sub(r"<[^>]+>", "", inner)).split())
        text = re.sub(r"\\\(\s*|\s*\\\)", "", text)         # inline math: its TeX, undelimited
        if text:
            known.setdefault(_key(text), text)
    return known


def clean_title(title: str, known: dict[str, str] | None = None) -> str:
    """A bookmark's title on one line, once: Chromium doubles some headings' text ("MapMap"; a
    heading that wraps comes out twice with a space between) and drops the space where a heading
    wraps; ``known`` (``heading_texts``) gives the heading's own text back where it matches."""
    title = " ".join(title.split())
    half = len(title) // 2
    if len(title) % 2 == 0 and title[:half] == title[half:]:
        title = title[:half]
    elif len(title) % 2 == 1 and title[half] == " " and title[:half] == title[half + 1:]:
        title = title[:half]
    else:
        key = _key(title)
        if len(key) % 2 == 0 and key[:len(key) // 2] == key[len(key) // 2:] and known \
                and key[:len(key) // 2] in known:
            return known[key[:len(key) // 2]]
    return (known or {}).get(_key(title), title)


def outline(pdf: Path, max_depth: int = 1, known: dict[str, str] | None = None) -> tuple[list[tuple[int, str, int]], int]:
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
            title = clean_title(item.title, known)
            if page > 1 and title:
                entries.append((depth, title, page))

    walk(reader.outline, 0)
    return entries, len(reader.pages)


PARTS = re.compile(r'<script[^>]*\sid="print-parts"[^>]*>(.*?)</script>', re.DOTALL)   # attributes in any order


def book_parts(html: Path) -> dict:
    """The book's title and parts as the one-page book declares them (book/_ext/singlehtml_book.py):
    ``{"root": title, "parts": [{"caption", "first"}, ...]}``."""
    found = PARTS.search(html.read_text(encoding="utf-8"))
    return json.loads(found.group(1).replace("<\\/", "</")) if found else {"root": "", "parts": []}


def part_starts(titles: list[str], parts: dict) -> dict[int, str]:
    """Which of the top-level ``titles`` starts which part (index -> caption): each part's first
    page's title, found in order. Empty unless every part is found."""
    starts, k = {}, 0
    for part in parts.get("parts", []):
        want = _key(part["first"])
        while k < len(titles) and _key(titles[k]) != want:
            k += 1
        if k == len(titles):
            return {}
        starts[k] = part["caption"]
    return starts


def with_parts(entries: list[tuple[int, str, int]], parts: dict) -> list[tuple[int, str, int]]:
    """``entries`` with each part's caption before its first page's entry, at depth -1 (its page:
    that page's). Unchanged unless every part's first page is found among the top-level entries."""
    tops = [k for k, (depth, _, _) in enumerate(entries) if depth == 0]
    starts = {tops[k]: caption for k, caption in part_starts([entries[k][1] for k in tops], parts).items()}
    out = []
    for k, entry in enumerate(entries):
        if k in starts:
            out.append((-1, starts[k], entry[2]))
        out.append(entry)
    return out


def rewrite_outline(pdf: Path, parts: dict, known: dict[str, str] | None = None) -> None:
    """Rewrite the bookmarks of ``pdf`` in place: titles cleaned, any on the cover dropped, each
    part a bookmark at its first page's bookmark, holding the bookmarks up to the next part, and
    the bookmarks before the first part under the book's title (Chromium makes none for the root
    page's title) unless one has it. Every bookmark keeps its page and position."""
    import pypdf
    from pypdf.generic import Fit

    reader = pypdf.PdfReader(str(pdf))

    def tree(items):
        nodes = []
        for item in items:
            if isinstance(item, list):
                if nodes:
                    nodes[-1]["children"] = tree(item)
                continue
            nodes.append({"title": clean_title(item.title, known), "page": reader.get_destination_page_number(item),
                          "left": item.get("/Left"), "top": item.get("/Top"), "children": []})
        return nodes

    nodes = [node for node in tree(reader.outline) if node["page"] > 0 and node["title"]]
    starts = part_starts([node["title"] for node in nodes], parts)
    groups: list[tuple[str | None, list[dict]]] = []
    if starts:
        bounds = sorted(starts) + [len(nodes)]
        head = nodes[:bounds[0]]
        root = parts.get("root", "")
        if head and root and _key(head[0]["title"]) != _key(root):
            groups.append((root, head))
        else:
            groups.append((None, head))
        groups += [(starts[a], nodes[a:b]) for a, b in zip(bounds, bounds[1:])]
    else:
        groups = [(None, nodes)]

    writer = pypdf.PdfWriter(str(pdf), incremental=True)        # the bookmarks appended, the rest kept as is
    if "/Outlines" in writer._root_object:
        del writer._root_object["/Outlines"]

    def fit(node):
        return Fit.xyz(left=node["left"], top=node["top"]) if node["top"] is not None else Fit.fit()

    def add(node, parent):
        item = writer.add_outline_item(title=node["title"], page_number=node["page"], parent=parent,
                                       fit=fit(node), is_open=False)
        for child in node["children"]:
            add(child, item)

    for caption, members in groups:
        parent = None
        if caption is not None and members:
            parent = writer.add_outline_item(title=caption, page_number=members[0]["page"],
                                             fit=fit(members[0]), bold=True)
        for node in members:
            add(node, parent)
    with open(pdf, "wb") as out:
        writer.write(out)


def contents_html(entries: list[tuple[int, str, int]], shift: int) -> str:
    """The contents page: each entry with its page number plus ``shift`` (the contents' length)."""
    import html

    def css(depth):
        return "part" if depth < 0 else min(depth, 1)

    rows = "\n".join(f'<li class="print-contents-{css(depth)}"><span>{html.escape(title)}</span>'
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
        parts, known = book_parts(html), heading_texts(html)
        entries, pages = outline(pdf, known=known)
        if not entries:
            return None
        entries = with_parts(entries, parts)
        shift = 1 + len(entries) // 45                    # a guess of the contents' length
        for _ in range(3):
            page.unlink(missing_ok=True)
            page = with_paper(html, paper, contents_html(entries, shift))
            failure = print_once(chromium, page, pdf, budget_ms, timeout)
            if failure:
                return failure
            length = outline(pdf)[1] - pages
            if length == shift:
                rewrite_outline(pdf, parts, known)
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
