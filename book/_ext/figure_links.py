"""Each figure a notebook draws gets a real alt text and a link to its full-size image.

MyST-NB writes a cell's image output as ``<img alt="../_images/<hash>.png">``: the alt text is a
file path, and a wide figure shrunk to the text column cannot be enlarged. After the HTML is
written, this extension rewrites every image in a code cell's output:

- ``alt`` = the figure's caption, the paragraph after the cell that starts with **Figure N.k.**
  (formulas reduced to their letters), or "Figure drawn by the code cell above" where a figure has
  no caption;
- the image is wrapped in ``<a class="figure-zoom" href="<the image>">``, which opens it at full
  size (book/_static/screen.css shows a zoom cursor).
"""

from __future__ import annotations

import re
from pathlib import Path

from bs4 import BeautifulSoup, NavigableString

NO_CAPTION = "Figure drawn by the code cell above"
MAX_ALT = 300


def plain(text: str) -> str:
    """Caption text for an alt attribute: TeX delimiters, commands and braces removed."""
    text = re.sub(r"\\\(|\\\)|\\\[|\\\]", "", text)
    text = re.sub(r"\\(lVert|rVert|Vert)(?![A-Za-z])\s*", "||", text)
    text = re.sub(r"\\(mathrm|mathcal|mathbf|operatorname|text|left|right)(?![A-Za-z])", "", text)
    text = re.sub(r"\\top(?![A-Za-z])", "T", text)
    text = re.sub(r"\\([A-Za-z]+)", r"\1", text)
    text = re.sub(r"[{}^_$]", "", text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_ALT else text[:MAX_ALT].rsplit(" ", 1)[0] + " ..."


def caption_after(cell) -> str | None:
    """The text of the **Figure** paragraph that follows a cell, if it is the next element."""
    following = cell.find_next_sibling()
    if following is None or following.name != "p":
        return None
    first = next((c for c in following.children if not (isinstance(c, NavigableString) and not c.strip())), None)
    if getattr(first, "name", None) == "strong" and first.get_text().startswith("Figure"):
        return plain(following.get_text())
    return None


def rewrite(html: str) -> tuple[str, int]:
    """``html`` with its cell-output images captioned and linked, and how many were changed."""
    soup = BeautifulSoup(html, "html.parser")
    changed = 0
    for image in soup.select("div.cell_output img"):
        if image.find_parent("a") is not None:
            continue
        cell = image.find_parent("div", class_="cell")
        image["alt"] = (caption_after(cell) if cell is not None else None) or NO_CAPTION
        link = soup.new_tag("a", href=image["src"], title="Open the figure at full size")
        link["class"] = "figure-zoom"
        image.wrap(link)
        changed += 1
    return (str(soup), changed) if changed else (html, 0)


def _rewrite_pages(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if "cell_output" not in text:
            continue
        new, changed = rewrite(text)
        if changed:
            page.write_text(new, encoding="utf-8")


def setup(app):
    app.connect("build-finished", _rewrite_pages)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
