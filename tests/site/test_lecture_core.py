"""Every chapter is a lecture core followed by a lab (book intro, "Teaching from this book"), and
its checks are numbered in reading order. Sizes are shown on the Build status page; the limits
below are the design's (a core is "a few thousand words" and one experiment), not measurements."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import lecture_core  # noqa: E402

CHAPTERS = lecture_core.chapters(ROOT)
CORE_WORDS, CORE_CELLS = 4500, 15
CHECK = re.compile(r"\*\*Check (\d+b?)\.(\d+)\b")


def test_every_chapter_page_is_found():
    assert len(CHAPTERS) == 13 and all(lecture_core.chapter_id(p) for p in CHAPTERS)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_core_then_take_away_then_lab_then_exercises(path):
    core, lab, _ = lecture_core.split(path)
    top_core = [t for level, t in lecture_core.headings(core) if level == 2]
    top_lab = [t for level, t in lecture_core.headings(lab) if level == 2]
    assert top_core[0] == "What you will learn", top_core
    assert top_core[-1] in ("What to take away", "Cheat sheet"), top_core
    assert "What to take away" in top_core, top_core
    assert top_lab[0].startswith("Lab: ") and top_lab[-1] == "Exercises", top_lab
    assert top_lab.count("Exercises") == 1 and "What to take away" not in top_lab, top_lab
    learn = next(c["source"] for c in core if "## What you will learn" in c["source"])
    assert "Lecture plan" in learn, "the first section ends with the lecture plan"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_core_has_the_size_of_a_lecture(path):
    size = lecture_core.measure(path)
    assert size["core_words"] <= CORE_WORDS and size["core_cells"] <= CORE_CELLS, size
    assert size["core_cells"] >= 2, "a core runs an experiment and checks it"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_checks_are_numbered_in_reading_order(path):
    number = lecture_core.chapter_id(path)[2:].lstrip("0")
    text = path.read_text(encoding="utf-8")
    order = []
    for page, k in CHECK.findall(text):
        assert page == number, f"Check {page}.{k} on the page of chapter {number}"
        if int(k) not in order:
            order.append(int(k))
    assert order == list(range(1, len(order) + 1)), order


def test_the_split_is_found_and_refused_when_missing(tmp_path):
    page = tmp_path / "ch07_x.md"
    body = "# T\n\n## What you will learn\n\ntext\n\n```{code-cell} ipython3\nx = 1\n```\n\n"
    page.write_text(body + "(ch07-lab)=\n## Lab: more\n\nmore text here\n\n## Exercises\n", encoding="utf-8")
    core, lab, found = lecture_core.split(page)
    assert found == "ch07" and lecture_core.headings(lab)[0] == (2, "Lab: more")
    assert sum(c["cell_type"] == "code" for c in core) == 1
    assert lecture_core.words(lab[0]["source"]) == 6     # "Lab: more", the text, "Exercises"
    page.write_text(body + "## Exercises\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no lab label"):
        lecture_core.split(page)
    page.write_text(body + "(ch08-lab)=\n## Lab: x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="names ch08"):
        lecture_core.split(page)


MENTION = re.compile(r"Checks?\s+((?:(?:\d+b?|N)\.\d+(?:\s*(?:,|and|or|-|–|to)\s*)?)+)")
NUMBER = re.compile(r"(\d+b?|N)\.(\d+)")


def _defined_checks() -> set[str]:
    pages = CHAPTERS + [ROOT / "book" / "numerics.md"]
    return {f"{page}.{k}" for path in pages
            for page, k in re.findall(r"\*\*Check (\d+b?|N)\.(\d+)\b", path.read_text(encoding="utf-8"))}


def test_every_mentioned_check_exists():
    """After renumbering, no page, docstring or test names a check that is not there."""
    defined = _defined_checks()
    sources = [*sorted((ROOT / "book").glob("*.md")), *sorted((ROOT / "lib").rglob("*.py")),
               *sorted((ROOT / "tools").glob("*.py"))]
    stale = []
    for path in sources:
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for mention in MENTION.finditer(line):
                for page, k in NUMBER.findall(mention.group(1)):
                    if f"{page}.{k}" not in defined:
                        stale.append(f"{path.relative_to(ROOT)}:{line_no}: Check {page}.{k}")
    assert not stale, stale


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_title_carries_the_chapter_number(path):
    """Navigation, references and slides show "4. Gradient descent ...", as the text cites chapters."""
    number = lecture_core.chapter_id(path)[2:].lstrip("0")
    title = next(line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("# "))
    assert title.startswith(f"# {number}. "), title
