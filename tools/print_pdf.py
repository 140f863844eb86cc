"""Print the one-page HTML book to PDF with headless Chromium (``make pdf``).

    python tools/print_pdf.py [--chromium PATH] _build/singlehtml/index.html _build/pdf/attnsvm.pdf

``make pdf`` first builds the whole book as one HTML page (``jupyter-book build --builder
singlehtml``, chapters executed as in ``make book``), then calls this script. Chromium loads the
page from disk, lets MathJax typeset every formula (it renders asynchronously: the page is given a
virtual-time budget, so printing waits until its scripts have finished) and prints it with the
book's print stylesheet (book/_static/print.css: code wraps, no navigation). Needs no network and
no TeX.
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


def with_paper(html: Path, paper: str) -> Path:
    """A copy of the page beside it (so that its relative links still resolve) whose first style
    sets the paper size; the caller deletes it."""
    text = html.read_text(encoding="utf-8")
    style = f"<style>@page {{ size: {PAPER[paper]}; }}</style>"
    head = text.find("<head>")
    if head < 0:
        raise ValueError(f"{html}: no <head> to put the paper size in")
    copy = html.with_name(f".{html.stem}-{paper}{html.suffix}")
    copy.write_text(text[:head + 6] + style + text[head + 6:], encoding="utf-8")
    return copy


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
    page = with_paper(args.html, args.paper)
    with tempfile.TemporaryDirectory(prefix="attnsvm-chromium-") as profile:
        command = chromium_command(chromium, page, partial, Path(profile), args.budget_ms)
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"print_pdf: {chromium} did not finish within {args.timeout} s", file=sys.stderr)
            return 1
        finally:
            page.unlink(missing_ok=True)
    if run.returncode != 0 or not partial.is_file() or partial.read_bytes()[:5] != b"%PDF-":
        print(f"print_pdf: {chromium} did not write a PDF (exit status {run.returncode}):\n"
              f"{run.stderr[-3000:]}", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return 1
    partial.replace(args.pdf)
    print(f"PDF: {args.pdf} ({args.pdf.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
