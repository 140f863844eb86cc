"""The whole book passes Sphinx's strict checks (no warning: references, labels, directives).

Execution is switched off here: the chapters' code is run, cell by cell, by the nbval tests in the
same pytest session, so this test only adds what nbval cannot see, the build's warnings (glued
numbers excepted: without execution there are none; the executed build checks them).
"""

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_book_builds_strictly_without_execution(tmp_path):
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    # Without execution no number is glued: those warnings are the executed build's to raise
    # (`make book`, which CI runs too); every other warning still fails this test.
    config["sphinx"]["config"]["suppress_warnings"] = ["mystnb.glue", "mystnb.glue_ref"]
    extensions = config["sphinx"]["local_extensions"]      # paths are relative to the config file
    config["sphinx"]["local_extensions"] = {name: str(ROOT / path) for name, path in extensions.items()}
    config_file = tmp_path / "_config.yml"
    config_file.write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build",
           "-W", "-n", "--keep-going", "--config", str(config_file), "--path-output",
           str(tmp_path), str(ROOT)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    pages = {p.stem for p in (tmp_path / "_build" / "html" / "book").glob("*.html")}
    expected = {Path(line.split("file:")[1].strip()).name
                for line in (ROOT / "_toc.yml").read_text().splitlines() if "file:" in line}
    assert expected <= pages, f"pages missing from the build: {sorted(expected - pages)}"


def test_no_cell_shows_a_stray_return_value():
    """A cell's last expression is displayed by IPython unless the cell ends with ';': a chapter
    cell that ends with a call such as ``ax.legend()`` or ``book.claim(...)`` would show
    ``<matplotlib.legend.Legend at 0x...>`` or ``'observed'`` above its figure. (Calls that return
    None, print, glue, display, are fine.)"""
    import ast

    import jupytext

    quiet = {"print", "glue", "display", "plt.show", "fig.show"}
    stray = []
    # Only the chapters (a front matter with a kernelspec, as the Makefile selects them), read as
    # MyST: jupytext would guess another format for a page with a ':::' fence and need pandoc.
    chapters = [path for path in sorted((ROOT / "book").glob("*.md"))
                if re.search(r"^kernelspec:", path.read_text(encoding="utf-8"), re.M)]
    assert chapters, "no chapter found under book/"
    for path in chapters:
        notebook = jupytext.read(path, fmt="md:myst")
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code" or cell.source.rstrip().endswith(";"):
                continue
            source = "\n".join(line for line in cell.source.splitlines()
                               if not line.lstrip().startswith(("%", "!")))
            body = ast.parse(source).body
            if body and isinstance(body[-1], ast.Expr):
                value = body[-1].value
                name = ast.unparse(value.func) if isinstance(value, ast.Call) else ast.unparse(value)
                if name not in quiet:
                    stray.append(f"{path.name}, code cell {index}: {name}")
    assert not stray, "cells that display a return value (end them with ';'): " + "; ".join(stray)
