"""tools/print_pdf.py without a browser: bookmark titles (doubled, or without the space where the
heading wrapped), the parts in the contents, and the rewritten bookmarks (parts at their first
chapter's page, holding its chapters; the root page's sections under the book's title; none on the
cover)."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import print_pdf  # noqa: E402

PARTS = {"root": "Intro", "parts": [{"caption": "Foundations", "first": "Notation"},
                                    {"caption": "Back matter", "first": "References"}]}


def test_doubled_heading_texts_are_cleaned(tmp_path):
    assert print_pdf.clean_title("MapMap") == "Map"
    assert print_pdf.clean_title("A heading\nthat wraps A heading\nthat wraps") == "A heading that wraps"
    assert print_pdf.clean_title("Exercises") == "Exercises"
    assert print_pdf.clean_title("a b a") == "a b a"
    # the space lost where a heading wraps comes back from the page's own headings
    page = tmp_path / "index.html"
    page.write_text('<h1>3. <span class="math">\\((K, Q)\\)</span> and the low-rank bias<a class="headerlink" '
                    'href="#x">#</a></h1><h2>Chapter &amp; map</h2>', encoding="utf-8")
    known = print_pdf.heading_texts(page)
    assert print_pdf.clean_title("3. (K, Q) and the low-rankbias", known) == "3. (K, Q) and the low-rank bias"
    assert print_pdf.clean_title("Chapter &mapChapter & map", known) == "Chapter & map"
    assert print_pdf.clean_title("Not a heading", known) == "Not a heading"


def test_parts_go_before_their_first_page():
    entries = [(0, "How to read", 3), (1, "A part of it", 3), (0, "Notation", 5), (0, "1. The model", 7),
               (1, "A section", 8), (0, "References", 9)]
    got = print_pdf.with_parts(entries, PARTS)
    assert got == [(0, "How to read", 3), (1, "A part of it", 3), (-1, "Foundations", 5), (0, "Notation", 5),
                   (0, "1. The model", 7), (1, "A section", 8), (-1, "Back matter", 9), (0, "References", 9)]
    assert print_pdf.with_parts(entries[:-1], PARTS) == entries[:-1]     # a part's first page is missing
    assert 'class="print-contents-part"' in print_pdf.contents_html(got, 1)


def _chromium_like_pdf(pdf: Path) -> None:
    import pypdf

    writer = pypdf.PdfWriter()
    for _ in range(6):
        writer.add_blank_page(width=200, height=200)
    for caption in ("Foundations", "Back matter"):              # what Chromium makes of the captions
        writer.add_outline_item(title=caption, page_number=0)
    for title, page in (("How to readHow to read", 1), ("Notation", 2), ("1. The model 1. The model", 3),
                        ("References", 5)):
        item = writer.add_outline_item(title=title, page_number=page)
        if page == 3:
            writer.add_outline_item(title="A sectionA section", page_number=4, parent=item)
    with open(pdf, "wb") as out:
        writer.write(out)


def _bookmarks(pdf: Path) -> list:
    import pypdf

    reader = pypdf.PdfReader(str(pdf))

    def walk(items):
        out = []
        for item in items:
            if isinstance(item, list):
                out[-1][2] = walk(item)
            else:
                out.append([item.title, reader.get_destination_page_number(item) + 1, []])
        return out

    return walk(reader.outline)


def test_bookmarks_are_rewritten(tmp_path):
    pytest.importorskip("pypdf")
    pdf = tmp_path / "book.pdf"
    _chromium_like_pdf(pdf)
    print_pdf.rewrite_outline(pdf, PARTS)
    assert _bookmarks(pdf) == [
        ["Intro", 2, [["How to read", 2, []]]],            # the root page's title has no bookmark
        ["Foundations", 3, [["Notation", 3, []], ["1. The model", 4, [["A section", 5, []]]]]],
        ["Back matter", 6, [["References", 6, []]]],
    ]
    # a part that is not found: titles cleaned, the cover's bookmarks dropped, no grouping
    _chromium_like_pdf(pdf)
    print_pdf.rewrite_outline(pdf, {"root": "Intro", "parts": [{"caption": "X", "first": "Nowhere"}]})
    assert _bookmarks(pdf) == [["How to read", 2, []], ["Notation", 3, []],
                               ["1. The model", 4, [["A section", 5, []]]], ["References", 6, []]]
