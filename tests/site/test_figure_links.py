"""Figures drawn by the notebooks: caption as alt text, a link to the full-size image
(book/_ext/figure_links.py)."""

import sys
from pathlib import Path

from bs4 import BeautifulSoup

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book" / "_ext"))
import figure_links  # noqa: E402

CELL = ('<div class="cell docutils container"><div class="cell_input"><pre>plot()</pre></div>'
        '<div class="cell_output docutils container"><img alt="../_images/{name}.png" '
        'src="../_images/{name}.png" /></div></div>')
PAGE = ("<!DOCTYPE html><html><body><section>" + CELL.format(name="a") +
        '<p><strong>Figure 2.3.</strong> The path <span class="math">\\(\\lVert W\\rVert_F\\)</span>'
        " against \\(R\\).</p>" + CELL.format(name="b") + "<p>Some text.</p>"
        '<img alt="logo.png" src="logo.png"/></section></body></html>')


def test_figures_get_their_caption_and_a_zoom_link():
    html, changed = figure_links.rewrite(PAGE)
    assert changed == 2
    images = BeautifulSoup(html, "html.parser").select("div.cell_output img")
    assert images[0]["alt"] == "Figure 2.3. The path ||W||F against R."
    assert images[1]["alt"] == figure_links.NO_CAPTION              # no Figure paragraph follows
    for image, name in zip(images, "ab"):
        link = image.parent
        assert link.name == "a" and link["href"] == f"../_images/{name}.png"
        assert "figure-zoom" in link["class"]
    assert 'alt="logo.png"' in html                                  # not a cell output: untouched
    assert figure_links.rewrite(html) == (html, 0)                   # a second build changes nothing


def test_long_captions_are_cut_at_a_word():
    text = figure_links.plain("word " * 200)
    assert len(text) <= figure_links.MAX_ALT + 4 and text.endswith(" ...")
