"""MyST as plain Markdown for the student notebooks (tools/plain_markdown.py): glued values as the
book formats them, references as their targets' titles, citations as author-year, directives as
quoted blocks; and the student edition of a chapter read with the build's values."""

import sys
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import plain_markdown  # noqa: E402
import student_edition  # noqa: E402

PAGE = """# Chapter 9: a page

(sec-rates)=
## Rates of descent

```{prf:theorem} Path of $W$ (paper A)
:label: thm-path

The path converges; see {prf:ref}`thm-path` and {ref}`the rates <sec-rates>`.

```{prf:proof}
Obvious.
```
```
"""
VALUES = {("", "corr"): "0.99876543", ("", "count"): "47.0", ("", "word"): "'observed'",
          ("ch01_model.md", "n"): "12", ("", "verdict"): "the corr **falls**"}


def _values(page, key):
    return VALUES[(page, key)]


@pytest.fixture
def targets(tmp_path):
    (tmp_path / "ch09_page.md").write_text(PAGE, encoding="utf-8")
    (tmp_path / "ch01_model.md").write_text("# The model: attention\n", encoding="utf-8")
    (tmp_path / "references.bib").write_text(
        "@article{a2023, author = {Tarzanagh, D. and Li, Y. and Oymak, S.}, title = {T}, year = {2023}}\n"
        "@article{b2018, author = {Soudry, D. and Hoffer, E.}, title = {S}, year = {2018}}\n", encoding="utf-8")
    return plain_markdown.Targets.of_book(tmp_path)


def test_glued_values_are_formatted_as_the_book_formats_them(targets):
    text = ("corr {glue:text}`corr:.4f`, {glue:text}`count:d` runs, status {glue:text}`word:s`, "
            "n = {glue:text}`ch01_model.md::n:d`, {glue:text}`corr`; {glue:md}`verdict:myst`.")
    assert plain_markdown.render(text, _values, targets) == (
        "corr 0.9988, 47 runs, status observed, n = 12, 0.99876543; the corr **falls**.")
    with pytest.raises(plain_markdown.PlainMarkdownError, match="no glued value for 'missing:d'"):
        plain_markdown.render("{glue:text}`missing:d`", _values, targets)


def test_references_and_citations_become_text(targets):
    text = ("{doc}`ch01_model`, {doc}`the model <ch01_model>`, {doc}`notation`, {prf:ref}`thm-path`, "
            "{ref}`sec-rates`, {ref}`here <sec-rates>`, {cite:t}`a2023`, {cite:p}`a2023,b2018`, "
            "{cite}`b2018`.")
    assert plain_markdown.render(text, _values, targets) == (
        "[The model: attention](ch01_model.ipynb), [the model](ch01_model.ipynb), *notation*, "
        "Theorem (Path of $W$ (paper A)), \"Rates of descent\", here, Tarzanagh et al. (2023), "
        "(Tarzanagh et al., 2023; Soudry and Hoffer, 2018), (Soudry and Hoffer, 2018).")


def test_directives_become_quoted_blocks_and_labels_vanish(targets):
    out = plain_markdown.render(PAGE, _values, targets)
    assert "(sec-rates)=" not in out and ":label:" not in out and "```{" not in out
    assert "> **Theorem (Path of $W$ (paper A)).**" in out
    assert "> The path converges; see Theorem (Path of $W$ (paper A)) and the rates." in out
    assert "> *Proof.* Obvious." in out
    with pytest.raises(plain_markdown.PlainMarkdownError, match="directive {mermaid}"):
        plain_markdown.render("```{mermaid}\ngraph\n```", _values, targets)


def test_student_edition_renders_a_chapter_with_the_cached_values(tmp_path, monkeypatch):
    import notebook_cache

    chapter = tmp_path / "ch09_page.md"
    chapter.write_text("---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
                       "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n"
                       "# A page\n\nThe value is {glue:text}`corr:.2f`.\n\n```{code-cell} ipython3\nx = 1\n```\n",
                       encoding="utf-8")
    monkeypatch.setattr(notebook_cache, "glued_data", lambda path: {"corr": "0.123"})
    target, _ = student_edition.student_edition(chapter, tmp_path / "out")
    cells = jupytext.read(target).cells
    assert "Student edition" in cells[0].source and cells[1].source == "# A page\n\nThe value is 0.12."
    assert cells[2].source == "x = 1"
    monkeypatch.setattr(notebook_cache, "glued_data", lambda path: None)
    with pytest.raises(student_edition.StudentEditionError, match="not in the book's execution cache"):
        student_edition.student_edition(chapter, tmp_path / "out")


def test_the_website_index_links_every_notebook(tmp_path):
    out = tmp_path / "student"
    out.mkdir()
    notebooks = [(out / "ch01_model.ipynb", "The model"), (out / "ch02_x.ipynb", "Paths & <rates>")]
    page = student_edition.write_index(out, notebooks).read_text(encoding="utf-8")
    assert '<a href="ch01_model.ipynb" download>The model</a>' in page
    assert "Paths &amp; &lt;rates&gt;" in page and "make setup" in page
