"""tools/notebook_cache.py and tools/execute_chapters.py: each chapter executed once per build.

A tiny text notebook is executed into a temporary cache; a second run finds it cached; the key is
the code (a changed cell is executed again) and the fingerprint (a changed library or scale
empties the cache); a failing notebook is reported and not cached; a page that asks MyST-NB to
execute it on every build is left to MyST-NB.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import execute_chapters  # noqa: E402
import notebook_cache  # noqa: E402

HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
{extra}---

# A page
"""


def page(path: Path, code: str, extra: str = "") -> Path:
    path.write_text(HEADER.format(extra=extra) + f"\n```{{code-cell}} ipython3\n{code}\n```\n")
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(notebook_cache, "CACHE", tmp_path / "cache")
    return tmp_path


def test_executed_once_then_served_from_the_cache(cache, capsys):
    nb = page(cache / "one.md", "print(6 * 7)")
    assert execute_chapters.main(["--jobs", "1", str(nb)]) == 0
    assert "1 to execute" in capsys.readouterr().out
    with notebook_cache.locked_cache() as c:
        record = notebook_cache.cached_record(c, notebook_cache.read_chapter(nb))
        stored = c.get_cache_bundle(record.pk).nb
    assert stored.cells[-1].outputs[0]["text"] == "42\n"
    assert len(record.data["cell_seconds"]) == 1 and record.data["execution_seconds"] > 0
    assert execute_chapters.main(["--jobs", "1", str(nb)]) == 0
    assert "0 to execute, 1 cached" in capsys.readouterr().out
    times = notebook_cache.chapter_times([nb])
    assert times[0]["seconds"] is not None and times[0]["producer"].startswith("tools/execute")


def test_changed_code_is_executed_again(cache, capsys):
    nb = page(cache / "one.md", "x = 1")
    execute_chapters.main(["--jobs", "1", str(nb)])
    page(nb, "x = 2")
    execute_chapters.main(["--jobs", "1", str(nb)])
    assert capsys.readouterr().out.count("1 to execute") == 2


def test_a_new_fingerprint_empties_the_cache(cache, monkeypatch, capsys):
    nb = page(cache / "one.md", "x = 1")
    execute_chapters.main(["--jobs", "1", str(nb)])
    monkeypatch.setenv("ATTNSVM_SCALE", "quick")                 # the scale is in the fingerprint
    assert notebook_cache.chapter_times([nb])[0]["seconds"] is None   # readers see nothing stale
    execute_chapters.main(["--jobs", "1", str(nb)])
    assert capsys.readouterr().out.count("1 to execute") == 2
    real = notebook_cache.fingerprint
    monkeypatch.setattr(notebook_cache, "fingerprint", lambda: {**real(), "library": "edited"})
    with notebook_cache.locked_cache() as c:
        assert not c.list_cache_records()


def test_a_failing_notebook_is_reported_and_not_cached(cache, capsys):
    good, bad = page(cache / "good.md", "x = 1"), page(cache / "bad.md", "assert 1 == 2, 'boom'")
    assert execute_chapters.main(["--jobs", "2", str(good), str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.md failed" in err and "boom" in err
    assert notebook_cache.chapter_times([bad])[0]["seconds"] is None
    assert notebook_cache.chapter_times([good])[0]["seconds"] is not None


def test_pages_executed_on_every_build_are_left_to_mystnb(cache, capsys):
    nb = page(cache / "status.md", "x = 1", extra="mystnb:\n  execution_mode: force\n")
    assert execute_chapters.main(["--jobs", "1", str(nb)]) == 0
    assert "0 to execute" in capsys.readouterr().out


def test_store_refuses_outputs_that_do_not_fit(cache):
    nb = page(cache / "one.md", "x = 1")
    with pytest.raises(ValueError, match="1 code cells"):
        notebook_cache.store(nb, notebook_cache.read_chapter(nb), [[], []], [0.1, 0.1], producer="test")


def test_the_book_chapters_are_the_text_notebooks_of_the_toc():
    chapters = notebook_cache.book_chapters()
    names = [p.stem for p in chapters]
    assert names[0] == "ch01_model" and "numerics" in names and "status" in names
    assert "intro" not in names and "claims" not in names and "references" not in names


@pytest.mark.parametrize("source, quiet", [
    ("plt.legend();", True), ("x = 1\nax.legend();  # a comment\n", True), ("ax.legend()", False),
    ("f(a;b)", False), ("for i in range(2):\n    ax.plot(i);\n", True), ("%matplotlib inline\nx;", True),
    ("s = 'a;'", False), ("", False)])
def test_a_trailing_semicolon_is_read_as_ipython_reads_it(source, quiet):
    assert notebook_cache.ends_with_semicolon(source) is quiet


def test_store_drops_the_values_a_trailing_semicolon_hides(cache):
    """nbval displays the value of a cell ending with ';' (it runs cells outside IPython's history);
    the stored chapter shows what a plain execution shows: nothing for that cell, the value of a
    cell without ';', and every printed output."""
    nb = page(cache / "two.md", "print('kept'); 1 + 1;")
    notebook = notebook_cache.read_chapter(nb)
    result = {"output_type": "execute_result", "data": {"text/plain": "2"}, "metadata": {},
              "execution_count": 1}
    printed = {"output_type": "stream", "name": "stdout", "text": "kept\n"}
    notebook_cache.store(nb, notebook, [[printed, result]], [0.1], producer="test")
    with notebook_cache.locked_cache() as store:
        stored = store.get_cache_bundle(notebook_cache.cached_record(store, notebook).pk).nb
    outputs = [cell.outputs for cell in stored.cells if cell.cell_type == "code"][0]
    assert [o["output_type"] for o in outputs] == ["stream"]
    nb = page(cache / "three.md", "1 + 1")
    notebook = notebook_cache.read_chapter(nb)
    notebook_cache.store(nb, notebook, [[result]], [0.1], producer="test")
    with notebook_cache.locked_cache() as store:
        stored = store.get_cache_bundle(notebook_cache.cached_record(store, notebook).pk).nb
    assert [o["output_type"] for c in stored.cells if c.cell_type == "code" for o in c.outputs] == \
        ["execute_result"]


def test_the_download_menu_offers_the_executed_notebook_with_its_outputs(cache):
    """book/_ext/notebook_download.py writes the cached execution (outputs included), not MyST-NB's
    output-folder copy, which for a cached chapter has no outputs."""
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import nbformat
    import notebook_download

    (cache / "book").mkdir()
    source = page(cache / "book" / "ch.md", "print(2)")
    notebook = notebook_cache.read_chapter(source)
    printed = {"output_type": "stream", "name": "stdout", "text": "2\n"}
    notebook_cache.store(source, notebook, [[printed]], [0.1], producer="test")
    empty = cache / "jupyter_execute" / "book"
    empty.mkdir(parents=True)
    nbformat.write(notebook, empty / "ch.ipynb")                 # MyST-NB's copy: no outputs
    app = SimpleNamespace(srcdir=str(cache), outdir=str(cache / "html"), env=SimpleNamespace(
        metadata={"book/ch": {"kernelspec": {}}},
        mystnb_config=SimpleNamespace(output_folder=str(cache / "jupyter_execute"))))
    context = {}
    notebook_download._offer_ipynb(app, "book/ch", None, context, None)
    offered = nbformat.read(cache / "html" / "_sources" / "book" / "ch.ipynb", as_version=4)
    assert context["ipynb_source"] == "book/ch.ipynb"
    assert [o["text"] for c in offered.cells if c.cell_type == "code" for o in c.outputs] == ["2\n"]
