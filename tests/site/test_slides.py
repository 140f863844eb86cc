"""Slides of the lecture cores (tools/slides.py, ``make slides``): built from a chapter's core as
executed, one idea a slide, offline (reveal.js and MathJax beside the decks)."""

import base64
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import notebook_cache  # noqa: E402
import slides  # noqa: E402
import test_book_html  # noqa: E402  (tests/site is on sys.path: conftest)

FRONT = ("---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
         "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n")
CHAPTER = FRONT + """# 9. Optimizers pick the norm

## What you will learn

- why the step's norm decides the limit, with $p = 2$ or $\\infty$.

**Lecture plan.** The theorem (20 min); the experiment (40 min).

```{code-cell} ipython3
x = 1
```

## The theorem

```{prf:theorem} Steepest descent (paper C)
:label: thm-steep

The direction converges to the $\\ell_p$ SVM, with corr {glue:text}`corr:.3f`.
```

```{prf:proof}
Not a slide.
```

```{code-cell} ipython3
plot()
```

**Figure 9.1.** The directions of three optimizers.

**Check 9.1 -- the limit.** *Claim:* corr -> 1. *Evidence:* {glue:text}`corr:.4f`. *Would have
failed if:* the direction drifted.

## What to take away

- the norm of the step picks the SVM.

(ch09-lab)=
## Lab: more

**Check 9.2 -- lab only.** Not in the deck.

## Exercises
"""
PNG = base64.b64encode(test_book_html.PNG).decode()


@pytest.fixture
def chapter(tmp_path, monkeypatch):
    path = tmp_path / "ch09_norms.md"
    path.write_text(CHAPTER, encoding="utf-8")
    executed = notebook_cache.read_chapter(path)
    code = [c for c in executed.cells if c.cell_type == "code"]
    for c in code:
        c.outputs = []
    code[1].outputs = [nbformat.v4.new_output("display_data", data={"image/png": PNG})]
    monkeypatch.setattr(notebook_cache, "cached_notebook", lambda p: executed)
    monkeypatch.setattr(notebook_cache, "glued_data", lambda p: {"corr": "0.99912"})
    return path


def test_the_core_becomes_one_slide_per_idea(chapter):
    title, deck = slides.chapter_slides(chapter)
    assert title == "9. Optimizers pick the norm"
    assert [s.kind for s in deck] == ["title", "plan", "box", "figure", "check", "take-away"]
    box, figure, check = deck[2], deck[3], deck[4]
    assert box.title == "Theorem (Steepest descent (paper C))" and "corr 0.999." in box.body
    assert "Not a slide" not in " ".join(s.body for s in deck)       # proofs stay in the book
    assert figure.image == PNG and figure.body.startswith("**Figure 9.1.**")
    assert check.title == "Check 9.1 -- the limit" and "0.9991" in check.body
    assert "lab only" not in " ".join(s.title + s.body for s in deck)   # the lab is not lectured


def test_decks_are_written_offline(chapter, tmp_path):
    out = tmp_path / "slides"
    written = slides.write_decks([chapter], out)
    assert [(d.name, n) for d, _, n in written] == [("ch09_norms.html", 6)]
    page = (out / "ch09_norms.html").read_text(encoding="utf-8")
    assert page.count("<section") == 6 and "\\(\\ell_p\\)" in page and "data:image/png;base64," in page
    for url in re.findall(r'(?:src|href)="(?!data:|#)([^"]+)"', page):
        assert not url.startswith("http") and (out / url).is_file(), url
    assert (out / "reveal" / "LICENSE").is_file() and (out / "index.html").is_file()


def test_a_chapter_not_executed_is_refused(chapter, monkeypatch):
    monkeypatch.setattr(notebook_cache, "cached_notebook", lambda p: None)
    with pytest.raises(slides.SlidesError, match="execution cache"):
        slides.chapter_slides(chapter)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium (make pdf's browser)")
def test_a_deck_renders_in_chromium(chapter, tmp_path):
    out = tmp_path / "slides"
    slides.write_decks([chapter], out)
    run = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp_path / 'profile'}", "--allow-file-access-from-files",
                          "--run-all-compositor-stages-before-draw", "--virtual-time-budget=20000",
                          "--dump-dom", (out / "ch09_norms.html").as_uri()],
                         capture_output=True, text=True, timeout=120)
    dom = run.stdout
    assert 'data-math="typeset"' in dom and "<mjx-container" in dom, run.stderr[-2000:]
    assert re.search(r'class="reveal[^"]*\bready\b', dom), "reveal.js did not start"
