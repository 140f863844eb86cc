"""pytest plugin: run the book's MyST-Markdown text notebooks through nbval.

nbval collects only ``.ipynb`` files. With ``--nbval`` or ``--nbval-lax`` this plugin also collects
every ``.md`` file whose front matter names a jupytext ``kernelspec`` (the chapters in ``book/``),
reads it with ``jupytext.read`` and hands it to nbval's own collector, so each code cell becomes one
test item run in order in one kernel (use ``--dist loadfile`` with xdist). Markdown pages without a
kernelspec (references, notation, ...) are ignored. Text notebooks store no outputs, so with
``--nbval-lax`` a cell passes when it runs without error: the checks are the ``assert`` cells.
Loaded from the root ``conftest.py``.
"""

from unittest import mock

import jupytext
import nbval.plugin
from nbval.plugin import IPyNbFile


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
        with mock.patch.object(nbval.plugin, "nbformat", _ReadWithJupytext):
            yield from super().collect()


def pytest_collect_file(file_path, parent):
    opt = parent.config.option
    if (opt.nbval or opt.nbval_lax) and file_path.suffix == ".md" and _is_text_notebook(file_path):
        return TextNotebookFile.from_parent(parent, path=file_path)
