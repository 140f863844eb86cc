"""The student edition (``make student``, tools/student_edition.py) removes every solution, keeps
every exercise and leaves the code cells outside gated solutions as they are: on a synthetic chapter
with every fence style it must handle, and on the book's own chapters, whose student editions must
not show a solution's code (its asserts and glues are the answers)."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("student_edition", ROOT / "tools" / "student_edition.py")
student_edition = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(student_edition)

FRONT_MATTER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""

CHAPTER = FRONT_MATTER + '''
# A synthetic chapter

Some text with $x^2$.

```{code-cell} ipython3
x = 1  # the {solution} of nothing: code cells are never touched
```

## Exercises

```{exercise} Backticks
:label: ex-a

What is $1 + 1$?
```

```{solution} ex-a
:class: dropdown

SECRET-A: $2$.
```

````{exercise} Nested code in the exercise
:label: ex-b

Run this:

```python
print("kept")
```
````

````{solution} ex-b
SECRET-B, with code inside:

```python
print("SECRET-B-CODE")
```

and a closing word.
````

:::{exercise} Colons
:label: ex-c

Why?
:::

::::{solution} ex-c
:class: dropdown

SECRET-C, with a nested note:

:::{note}
SECRET-C-NOTE
:::

```python
print("SECRET-C-CODE")
```
::::

Text between solutions stays.

:::::{solution} ex-c
::::{admonition} Deeper
:::{note}
SECRET-D
:::
::::
:::::

+++

```{exercise} A gated one
:label: ex-e

Compute it.
```

```{solution-start} ex-e
:class: dropdown
```

SECRET-E-TEXT

```{code-cell} ipython3
y = "SECRET-E-CODE"
```

The solution goes on in a second markdown cell: SECRET-E-MORE.

```{solution-end}
```

After the gated solution.

```{code-cell} ipython3
z = x + 1
```

````{note}
A note holding a solution of its own.

```{solution} ex-a
SECRET-F
```
````
'''


def _read_md(text: str) -> nbformat.NotebookNode:
    return jupytext.reads(text, fmt="md:myst")


def _markdown(notebook) -> str:
    return "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")


def _code(notebook) -> list:
    return [(cell.source, dict(cell.metadata)) for cell in notebook.cells if cell.cell_type == "code"]


@pytest.fixture
def synthetic(tmp_path) -> Path:
    chapter = tmp_path / "ch99_synthetic.md"
    chapter.write_text(CHAPTER, encoding="utf-8")
    return chapter


def test_synthetic_chapter(synthetic, tmp_path):
    out = tmp_path / "student"
    assert student_edition.main(["--output", str(out), "--keep-myst", str(synthetic)]) == 0
    student = nbformat.read(out / "ch99_synthetic.ipynb", as_version=4)
    nbformat.validate(student)
    text = _markdown(student)

    assert "{solution" not in text
    assert "SECRET" not in text
    assert text.count("{exercise}") == 4
    for kept in ("# A synthetic chapter", 'print("kept")', "Text between solutions stays.",
                 "After the gated solution.", "A note holding a solution of its own.", "Why?"):
        assert kept in text
    # code cells: the gated solution's code cell is gone, the others are unchanged
    source = _read_md(CHAPTER)
    assert _code(student) == [c for c in _code(source) if "SECRET" not in c[0]]
    assert len(_code(student)) == 2
    # the fences stay balanced: every directive that was kept is still closed
    assert text.count("````{note}") == 1 and text.rstrip().endswith("\n````")
    assert student.metadata["kernelspec"]["name"] == "python3"


def test_leak_rules_detect_a_leak():
    """The rules of test_real_chapter_leaks_no_solution flag an ungated solution's code cell."""
    leaky = _read_md(FRONT_MATTER + '\n```{exercise} E\n:label: ex-l\n\nHow much?\n```\n\n'
                     '```{solution} ex-l\nSECRET.\n```\n\n```{code-cell} ipython3\n'
                     '# Exercise "E": the numbers of its solution\nassert 1 + 1 == 2\n```\n')
    assert len(_ungated_solution_code(leaky)) == 1
    student_edition.strip_solutions(leaky)
    assert _exercise_code(leaky) == ['# Exercise "E": the numbers of its solution']
    gated = _read_md(CHAPTER)
    assert _ungated_solution_code(gated) == [] and _gated_code_cells(gated) == [False, True, False]


def test_fence_rules():
    strip = student_edition.strip_solutions_from_lines
    # a code block that shows directive syntax is literal text: kept whole
    literal = ["````markdown", "```{solution} ex", "shown, not a solution", "```", "````", "after"]
    assert strip(literal) == (literal, False, 0)
    # a shorter fence of the same character does not close the solution
    lines = ["````{solution} ex", "```", "inner", "```", "````", "after"]
    assert strip(lines) == (["after"], False, 1)
    # a fence of the other character does not close it either
    lines = ["::::{solution} ex", "```", "x", "```", "::::", "after"]
    assert strip(lines) == (["after"], False, 1)
    # an unclosed solution runs to the end of the cell, as in MyST
    assert strip(["before", "```{solution} ex", "text"]) == (["before"], False, 1)
    # an indented closer closes
    assert strip(["```{solution} ex", "text", "  ```", "after"]) == (["after"], False, 1)


def test_unclosed_gated_solution_is_an_error():
    notebook = _read_md(FRONT_MATTER + "\n```{solution-start} ex\n```\n\nnever closed\n")
    with pytest.raises(student_edition.StudentEditionError):
        student_edition.strip_solutions(notebook)


def test_command_line(synthetic, tmp_path):
    out = tmp_path / "cli"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "student_edition.py"), "-o", str(out),
                          str(synthetic)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "6 solution(s) removed" in run.stdout  # a, b, c, the deeper one, the gated one, f
    assert (out / "ch99_synthetic.ipynb").is_file()


CHAPTERS = student_edition.default_chapters()


def test_every_chapter_is_found():
    toc = (ROOT / "_toc.yml").read_text()
    in_toc = {Path(f).name for f in re.findall(r"file:\s*(book/ch\S+)", toc)}
    assert in_toc and in_toc <= {path.stem for path in CHAPTERS}


_DIRECTIVE_OPENER = re.compile(r"^\s*(?:`{3,}|:{3,})\{([\w-]+)\}", re.MULTILINE)


def _gated_code_cells(notebook) -> list[bool]:
    """For each code cell: whether it lies between a ``{solution-start}`` and its ``{solution-end}``
    (read from the markdown cells' directive openers, independently of the tool)."""
    gated, inside = [], False
    for cell in notebook.cells:
        if cell.cell_type == "code":
            gated.append(inside)
            continue
        for name in _DIRECTIVE_OPENER.findall(cell.source):
            if name == "solution-start":
                inside = True
            elif name == "solution-end":
                inside = False
    return gated


def _ungated_solution_code(notebook) -> list[str]:
    """Code cells that come right after a plain ``{solution}`` block: the code of that solution,
    which the student edition keeps (a solution with code must be gated)."""
    leaks, previous = [], None
    for cell in notebook.cells:
        if cell.cell_type == "code" and previous == "solution":
            leaks.append(cell.source.split("\n", 3)[:3])
        if cell.cell_type == "markdown":
            names = _DIRECTIVE_OPENER.findall(cell.source)
            previous = names[-1] if names else previous
        else:
            previous = None
    return leaks


def _exercise_code(notebook) -> list[str]:
    """Code cells whose first code line names an exercise (the book's convention for the cell that
    computes a solution's numbers: ``# Exercise "...": ...``)."""
    firsts = [next((line for line in cell.source.splitlines()
                    if line.strip() and not line.startswith(":")), "")
              for cell in notebook.cells if cell.cell_type == "code"]
    return [line for line in firsts if line.lstrip().startswith("# Exercise")]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_real_chapter(chapter, tmp_path):
    source = jupytext.read(chapter, fmt="md:myst")
    target, removed = student_edition.student_edition(chapter, tmp_path, plain=False)
    student = nbformat.read(target, as_version=4)
    nbformat.validate(student)
    source_text, student_text = _markdown(source), _markdown(student)

    assert removed == len(re.findall(r"^\s*(?:`{3,}|:{3,})\{solution(?:-start)?\}", source_text,
                                     re.MULTILINE))
    assert "{solution" not in student_text
    assert student_text.count("{exercise}") == source_text.count("{exercise}")
    # every code cell outside a gated solution is kept unchanged, those inside are dropped
    gated = _gated_code_cells(source)
    assert _code(student) == [c for c, g in zip(_code(source), gated) if not g]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_real_chapter_leaks_no_solution(chapter, tmp_path):
    """No answer in the student edition: a solution's code cell (which asserts and glues its
    numbers) must be inside a gated solution, so that the student edition drops it."""
    source = jupytext.read(chapter, fmt="md:myst")
    target, _ = student_edition.student_edition(chapter, tmp_path, plain=False)
    student = nbformat.read(target, as_version=4)
    assert _ungated_solution_code(source) == [], "a {solution} followed by its code: gate it"
    assert _exercise_code(student) == []
    # no assert or glue of a gated solution's code (its answers) survives in the student edition
    gated = _gated_code_cells(source)
    secret = {line.strip() for (code, _), g in zip(_code(source), gated) if g
              for line in code.splitlines() if "assert " in line or "glue(" in line}
    kept = {line.strip() for code, _ in _code(student) for line in code.splitlines()}
    assert not secret & kept
