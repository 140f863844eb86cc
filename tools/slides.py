"""Slides of each chapter's lecture core, as offline reveal.js decks (``make slides``).

    python tools/slides.py [--output DIR] [--mathjax-url URL] [CHAPTER.md ...]

A deck is made from the same sources as the book, the chapter's lecture core
(``tools/lecture_core.py``) as executed in the build's execution cache: a title slide (what you
will learn), the lecture plan, one slide per theorem box of the core (definitions, theorems,
propositions, ...; proofs stay in the book), one per figure with its caption, one per check
paragraph (claim, evidence, what would have failed) and the take-away. Glued numbers are those of
the build, Markdown is rendered by markdown-it (the MyST parser's own), math by MathJax 3.

Everything is served from the output folder, with no CDN: reveal.js from the pinned PyPI package
``sphinx-revealjs`` (which ships it; reveal.js's own licence is copied with it), MathJax from the
package the book uses (``django-static-mathjax``), unless ``--mathjax-url`` points at a copy (the
website's decks use the book's ``_static/mathjax``).
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lecture_core  # noqa: E402
import notebook_cache  # noqa: E402
import plain_markdown  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = ROOT / "_build" / "slides"
BOXES = ("prf:definition", "prf:theorem", "prf:proposition", "prf:lemma", "prf:corollary",
         "prf:conjecture", "prf:assumption", "prf:remark")
FIGURE = re.compile(r"^\*\*Figure [\w.]+\.\*\*")
CHECK = re.compile(r"^\*\*Check [\w.]+")
SECTION = re.compile(r"^##\s+(.*\S)\s*$")


class SlidesError(ValueError):
    """A chapter that cannot be made into slides (not executed in the cache, no core)."""


@dataclass
class Slide:
    kind: str          # "title", "plan", "box", "figure", "check", "take-away"
    title: str
    body: str          # plain Markdown
    image: str = ""    # a figure's PNG, base64


def _markdown_renderer():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    def math(content: str, options: dict) -> str:
        text = html.escape(content)
        return f"\\[{text}\\]" if options.get("display_mode") else f"\\({text}\\)"

    md = MarkdownIt("commonmark").enable("table")
    dollarmath_plugin(md, renderer=math)
    return md


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def _fence_blocks(text: str) -> list[tuple[str, str, str]]:
    """Top-level MyST directive blocks of ``text``: (name, title, body without options)."""
    blocks, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        directive = plain_markdown.directive_at(lines, i)
        if directive is None:
            i += 1
            continue
        opener, body, end = directive
        blocks.append((opener["name"], opener["title"].strip(), "\n".join(body)))
        i = end + 1
    return blocks


def chapter_slides(path: Path, targets: plain_markdown.Targets | None = None) -> tuple[str, list[Slide]]:
    """The title of chapter ``path`` and the slides of its lecture core."""
    executed = notebook_cache.cached_notebook(path)
    data = notebook_cache.glued_data(path)
    if executed is None or data is None:
        raise SlidesError(f"{path.name} is not in the book's execution cache: run `make book` first "
                          "(`make slides` executes the chapters it lacks)")
    targets = targets or plain_markdown.Targets.of_book(path.parent)
    pages = {path.stem: data}

    def values(page: str, key: str) -> str:
        name = Path(page).stem if page else path.stem
        if name not in pages:
            pages[name] = notebook_cache.glued_data(path.parent / f"{name}.md") or {}
        return pages[name][key]

    def plain(text: str) -> str:
        return plain_markdown.render(text, values, targets)

    core, _, _ = lecture_core.split(path)
    outputs = [cell for cell in executed.cells if cell.cell_type == "code"]
    title, slides, section, code_index, pending_images = path.stem, [], "", 0, []
    for cell in core:
        if cell["cell_type"] == "code":
            pending_images = [o["data"]["image/png"] for o in outputs[code_index].get("outputs", [])
                              if "image/png" in o.get("data", {})] if code_index < len(outputs) else []
            code_index += 1
            continue
        source = cell["source"]
        for heading in re.finditer(r"^# (.*\S)\s*$", source, re.MULTILINE):
            title = plain(heading.group(1))
        for name, heading_text, body in _fence_blocks(source):
            if name in BOXES:
                slides.append(Slide("box", plain_markdown.box_title(name, plain(heading_text)), plain(body)))
        outside = re.sub(r"^(`{3,}|:{3,})\{[\s\S]*?^\1\s*$", "", source, flags=re.MULTILINE)
        for part in re.split(r"^(?=## )", outside, flags=re.MULTILINE):
            heading = SECTION.match(part.split("\n", 1)[0]) if part.startswith("## ") else None
            if heading:
                section = heading.group(1)
            body = part.split("\n", 1)[1] if heading else part
            if heading and section in ("What you will learn", "What to take away"):
                kind = "title" if section == "What you will learn" else "take-away"
                text, _, plan = body.partition("**Lecture plan")
                slides.append(Slide(kind, title if kind == "title" else section, plain(text.strip())))
                if plan:
                    slides.append(Slide("plan", "Lecture plan", plain("**Lecture plan" + plan)))
                continue
            for paragraph in _paragraphs(body):
                if FIGURE.match(paragraph) and pending_images:
                    slides.append(Slide("figure", section, plain(paragraph), pending_images.pop(0)))
                elif CHECK.match(paragraph):
                    name = re.match(r"\*\*(.*?)\*\*", paragraph)
                    body = paragraph[name.end():] if name else paragraph
                    body = re.sub(r"\s*(\*(?:Evidence|Would have failed if|Not shown):?\*)", r"\n\n\1", body)
                    slides.append(Slide("check", plain(name.group(1)).rstrip(". ") if name else "Check",
                                        plain(body.strip())))
    if not slides:
        raise SlidesError(f"{path.name}: no slide found in its lecture core")
    return title, slides


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{title}</title>
<link rel="stylesheet" href="reveal/dist/reveal.css">
<link rel="stylesheet" href="reveal/dist/theme/white.css">
<style>
.reveal {{ font-size: 26px; }}
.reveal .slides section {{ text-align: left; height: 100%; overflow-y: auto; }}
.reveal h2 {{ font-size: 1.35em; text-transform: none; }}
.reveal section.dense {{ font-size: 0.8em; }}
.reveal section.figure img {{ max-height: 62vh; margin: 0 auto; display: block; }}
.reveal section.figure p {{ font-size: 0.65em; }}
.reveal .kind {{ color: #777; font-size: 0.6em; text-transform: uppercase; letter-spacing: 0.08em; }}
.reveal table {{ font-size: 0.7em; }}
</style>
<script>window.MathJax = {{ tex: {{ inlineMath: [["\\\\(", "\\\\)"]], displayMath: [["\\\\[", "\\\\]"]] }},
  startup: {{ pageReady: function () {{ return MathJax.startup.defaultPageReady().then(function () {{
    document.body.setAttribute("data-math", "typeset"); }}); }} }} }};</script>
<script src="{mathjax}" defer></script>
</head><body>
<div class="reveal"><div class="slides">
{sections}
</div></div>
<script src="reveal/dist/reveal.js"></script>
<script>Reveal.initialize({{ hash: true, slideNumber: "c/t", width: 1280, height: 760, margin: 0.05 }});</script>
</body></html>
"""
KIND_LABEL = {"box": "", "figure": "figure", "check": "check", "take-away": "", "plan": "", "title": ""}


def deck_html(title: str, slides: list[Slide], source: str, mathjax_url: str) -> str:
    """One reveal.js page for a chapter's slides."""
    md = _markdown_renderer()
    sections = []
    for slide in slides:
        dense = " dense" if len(slide.body.split()) > 110 else ""
        label = KIND_LABEL[slide.kind]
        parts = [f'<p class="kind">{label}</p>' if label else "",
                 f"<h2>{md.renderInline(slide.title)}</h2>"]
        if slide.image:
            parts.append(f'<img alt="{html.escape(slide.body[:200])}" src="data:image/png;base64,'
                         f'{slide.image.strip()}">')
        parts.append(md.render(slide.body))
        if slide.kind == "title":
            parts.append(f'<p class="kind">from the book page {html.escape(source)}</p>')
        sections.append(f'<section class="{slide.kind}{dense}">\n' + "\n".join(p for p in parts if p)
                        + "\n</section>")
    return PAGE.format(title=html.escape(title), mathjax=html.escape(mathjax_url),
                       sections="\n".join(sections))


def copy_assets(output: Path, with_mathjax: bool) -> None:
    """reveal.js (from sphinx-revealjs) and, unless served elsewhere, MathJax into ``output``."""
    import sphinx_revealjs

    reveal = Path(sphinx_revealjs.__file__).parent / "_static" / "revealjs"
    for part in ("dist", "LICENSE"):
        source, target = reveal / part, output / "reveal" / part
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    if with_mathjax:
        import mathjax

        source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
        for sub in ("a11y", "adaptors", "input", "output", "sre", "ui"):
            shutil.copytree(source / sub, output / "mathjax" / sub, dirs_exist_ok=True)
        shutil.copy2(source / "tex-mml-chtml.js", output / "mathjax" / "tex-mml-chtml.js")


def write_decks(chapters: list[Path], output: Path, mathjax_url: str | None = None) -> list[tuple[Path, str, int]]:
    """Write one deck per chapter, an index and the assets; return (deck, title, slides) per chapter."""
    output.mkdir(parents=True, exist_ok=True)
    copy_assets(output, with_mathjax=mathjax_url is None)
    url = mathjax_url or "mathjax/tex-mml-chtml.js"
    targets = plain_markdown.Targets.of_book(chapters[0].parent) if chapters else None
    written = []
    for path in chapters:
        title, slides = chapter_slides(path, targets)
        deck = output / f"{path.stem}.html"
        deck.write_text(deck_html(title, slides, path.stem, url), encoding="utf-8")
        written.append((deck, title, len(slides)))
    items = "\n".join(f'<li><a href="{d.name}">{html.escape(t)}</a> ({n} slides)</li>' for d, t, n in written)
    (output / "index.html").write_text(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>attnsvm: slides</title>"
        "</head><body><h1>attnsvm: slides of the lecture cores</h1><p>One deck per chapter, made from "
        "its lecture core as executed for this build (arrow keys move, <kbd>Esc</kbd> shows every "
        "slide, <kbd>S</kbd> the speaker view). Text and figures: CC BY 4.0; reveal.js: MIT "
        "(<code>reveal/LICENSE</code>).</p>\n<ul>\n" + items + "\n</ul></body></html>\n", encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="chapter pages (default: every chapter)")
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--mathjax-url", default=None,
                        help="URL of tex-mml-chtml.js relative to the decks (default: a copy beside them)")
    args = parser.parse_args(argv)
    try:
        written = write_decks(args.chapters or lecture_core.chapters(), args.output, args.mathjax_url)
    except (SlidesError, plain_markdown.PlainMarkdownError, ValueError) as error:
        print(f"slides: {error}", file=sys.stderr)
        return 1
    for deck, title, count in written:
        print(f"{deck}: {count} slides ({title})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
