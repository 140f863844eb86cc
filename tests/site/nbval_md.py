"""pytest plugin: run the book's MyST-Markdown text notebooks through nbval.

nbval collects only ``.ipynb`` files. With ``--nbval`` or ``--nbval-lax`` this plugin also collects
every ``.md`` file whose front matter names a jupytext ``kernelspec`` (the chapters in ``book/``),
reads it with ``jupytext.read`` and hands it to nbval's own collector, so each code cell becomes one
test item run in order in one kernel (use ``--dist loadfile`` with xdist). Markdown pages without a
kernelspec (references, notation, ...) are ignored. Text notebooks store no outputs, so with
``--nbval-lax`` a cell passes when it runs without error: the checks are the ``assert`` cells.
Loaded from the root ``conftest.py``.

A chapter all of whose cells passed is stored, with the outputs nbval recorded and the cells' run
times, in the book's execution cache (``tools/notebook_cache.py``): ``make book`` after ``make
test`` then renders it without executing it a second time.
"""

from pathlib import Path
from unittest import mock

import jupytext
import nbval.plugin
from nbval.plugin import IPyNbFile

import notebook_cache

# nodeid -> (passed, seconds) of each cell's "call" phase, filled by pytest_runtest_logreport
_CELL_RESULTS: dict[str, tuple[bool, float]] = {}


def _is_text_notebook(path):
    """True for a Markdown file whose YAML front matter has a ``kernelspec``."""
    with open(path, encoding="utf-8") as f:
        if f.readline().strip() != "---":
            return False
        for line in f:
            if line.strip() == "---":
                return False
            if line.startswith("kernelspec:"):
                return True
    return False


class _ReadWithJupytext:
    """Stands in for the ``nbformat`` module inside nbval's ``collect``: reads text notebooks."""

    @staticmethod
    def read(path, as_version):
        return jupytext.read(path, as_version=as_version)


class TextNotebookFile(IPyNbFile):
    """nbval's notebook collector, fed from a jupytext text notebook."""

    def collect(self):
        self.cells = []
        with mock.patch.object(nbval.plugin, "nbformat", _ReadWithJupytext):
            for item in super().collect():
                self.cells.append(item)
                yield item

    def teardown(self):
        super().teardown()
        results = [_CELL_RESULTS.get(cell.nodeid) for cell in getattr(self, "cells", [])]
        if results and all(r is not None and r[0] for r in results):
            notebook_cache.store(Path(str(self.path)), self.nb,
                                 [cell.test_outputs or [] for cell in self.cells],
                                 [r[1] for r in results], producer="nbval (make test)")


def pytest_runtest_logreport(report):
    if report.when == "call":
        _CELL_RESULTS[report.nodeid] = (report.passed, report.duration)


def pytest_collect_file(file_path, parent):
    opt = parent.config.option
    if (opt.nbval or opt.nbval_lax) and file_path.suffix == ".md" and _is_text_notebook(file_path):
        return TextNotebookFile.from_parent(parent, path=file_path)
