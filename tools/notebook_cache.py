"""One execution of each chapter per build: the book's execution cache, shared by the tests.

The book is built with MyST-NB's ``execute_notebooks: cache``: a chapter whose code cells match an
executed notebook in the jupyter-cache at ``_build/.jupyter_cache`` is rendered from it, any other
is executed. Two producers fill that cache, so that CI executes each chapter once, not twice:

- ``make test`` runs every chapter through nbval (``tests/site/nbval_md.py``); a chapter all of whose
  cells passed is stored here with the outputs nbval recorded;
- ``make book`` first runs ``tools/execute_chapters.py``, which executes the chapters that are not
  cached yet, two at a time, and stores them.

A cached notebook is valid only for the code that produced it. jupyter-cache keys it by the
chapter's code cells; everything else its outputs depend on goes into a *fingerprint* (the
library's source, the pinned requirements and the experiments' scale ``ATTNSVM_SCALE``; the
thread count is left out, since no printed number may depend on it): when the fingerprint differs from the one the cache was filled under, the cache
is emptied before use. Each stored notebook also records its run time, per cell, which the Build
status page shows.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Iterator, Sequence

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_build" / ".jupyter_cache"
FINGERPRINT_FILE = "attnsvm-fingerprint.json"
# What the executed outputs depend on besides the chapter's own code cells.
ENVIRONMENT = ("ATTNSVM_SCALE",)


def fingerprint() -> dict[str, str]:
    """The library's source hash, the requirements' hash and the environment that shapes results."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "lib" / "attnsvm").rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    pins = ROOT / "requirements.txt"
    requirements = hashlib.sha256(pins.read_bytes() if pins.exists() else b"").hexdigest()
    env = {name: os.environ.get(name, "").strip().lower() for name in ENVIRONMENT}
    env["ATTNSVM_SCALE"] = env["ATTNSVM_SCALE"] or "paper"
    return {"library": digest.hexdigest(), "requirements": requirements, **env}


@contextlib.contextmanager
def locked_cache(path: Path | None = None, clear_stale: bool = True) -> Iterator["object"]:
    """The jupyter-cache at ``path``, held under an exclusive file lock (two test workers never
    write it at once). A cache filled under another fingerprint is emptied first, or, with
    ``clear_stale=False`` (readers), yielded as None."""
    from jupyter_cache import get_cache

    path = CACHE if path is None else path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".jupyter_cache.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            stamp = path / FINGERPRINT_FILE
            current = fingerprint()
            stale = path.exists() and (not stamp.exists()
                                       or json.loads(stamp.read_text()) != current)
            if stale and not clear_stale:
                yield None
                return
            if stale:
                shutil.rmtree(path)
            path.mkdir(parents=True, exist_ok=True)
            cache = get_cache(str(path))
            stamp.write_text(json.dumps(current, indent=1))
            yield cache
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def clear_if_stale() -> None:
    """Empty the cache if it was filled under another fingerprint (library, requirements, scale)."""
    with locked_cache():
        pass


def is_text_notebook(path: Path) -> bool:
    """True for a Markdown page whose YAML front matter has a ``kernelspec`` (a chapter)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].strip() != "---":
        return False
    for line in lines[1:]:
        if line.strip() == "---":
            return False
        if line.startswith("kernelspec:"):
            return True
    return False


def book_chapters(root: Path = ROOT) -> list[Path]:
    """The text notebooks of ``_toc.yml``, in reading order."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    files = [entry["file"] for part in toc.get("parts", []) for entry in part.get("chapters", [])]
    return [root / (f + ".md") for f in files if is_text_notebook(root / (f + ".md"))]


def read_chapter(path: Path) -> nbformat.NotebookNode:
    """A chapter as MyST-NB reads it (the same code cells and cell metadata, hence the same key)."""
    return jupytext.read(str(path))


def cached_record(cache, notebook: nbformat.NotebookNode):
    """The cache record of this notebook's code, or None."""
    try:
        return cache.match_cache_notebook(notebook)
    except KeyError:
        return None


def ends_with_semicolon(source: str) -> bool:
    """Whether a cell's last statement ends with ``;``, which tells IPython not to display its
    value. nbval runs cells without storing them in IPython's history, so IPython checks the
    previous cell's source instead and displays such values (a ``<matplotlib.legend.Legend at
    0x...>`` above a figure): :func:`store` drops them, as a plain execution would."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return source.rstrip().endswith(";")
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.DEDENT,
            tokenize.INDENT}
    meaningful = [token for token in tokens if token.type not in skip]
    return bool(meaningful) and meaningful[-1].string == ";"


def store(path: Path, notebook: nbformat.NotebookNode, outputs: Sequence[list],
          cell_seconds: Sequence[float], producer: str) -> None:
    """Cache ``notebook`` (chapter ``path`` as it was read and executed; the file may have changed
    since) with ``outputs[k]`` the outputs of its k-th code cell.

    The stored notebook is a copy of the one read from the source (so its key is that code's), with
    the outputs and execution counts filled in; ``cell_seconds`` are the code cells' run times.
    """
    import copy

    from jupyter_cache.base import CacheBundleIn

    notebook = copy.deepcopy(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    if len(code) != len(outputs) or len(code) != len(cell_seconds):
        raise ValueError(f"{path.name}: {len(code)} code cells, but outputs for {len(outputs)} "
                         f"and times for {len(cell_seconds)}")
    for count, (cell, cell_outputs) in enumerate(zip(code, outputs), start=1):
        cell.outputs = [nbformat.from_dict(dict(output)) for output in cell_outputs
                        if not (output.get("output_type") == "execute_result"
                                and ends_with_semicolon(cell.source))]
        cell.execution_count = count
        for output in cell.outputs:
            if output.get("output_type") == "execute_result":
                output["execution_count"] = count
    data = {"execution_seconds": float(sum(cell_seconds)),
            "cell_seconds": [round(float(s), 3) for s in cell_seconds], "producer": producer}
    with locked_cache() as cache:
        cache.cache_notebook_bundle(CacheBundleIn(notebook, str(path.resolve()), data=data),
                                   check_validity=False, overwrite=True)


def chapter_times(paths: Sequence[Path]) -> list[dict]:
    """Per chapter: seconds, slowest cell and who executed it, from the cache (None if absent)."""
    rows = []
    with locked_cache(clear_stale=False) as cache:
        for path in paths:
            record = None if cache is None else cached_record(cache, read_chapter(path))
            if record is None:
                rows.append({"chapter": path.stem, "seconds": None})
                continue
            cells = record.data.get("cell_seconds") or [record.data.get("execution_seconds", 0.0)]
            rows.append({"chapter": path.stem, "seconds": record.data.get("execution_seconds"),
                         "slowest_cell": max(cells), "producer": record.data.get("producer", "?")})
    return rows


GLUE_MIME = "application/papermill.record/text/plain"
GLUE_MARKDOWN = "application/papermill.record/text/markdown"


def cached_notebook(path: Path) -> nbformat.NotebookNode | None:
    """Chapter ``path`` as executed in the cache, with its outputs; None when it is not cached."""
    with locked_cache(clear_stale=False) as cache:
        record = None if cache is None else cached_record(cache, read_chapter(path))
        return None if record is None else cache.get_cache_bundle(record.pk).nb


def glued_data(path: Path) -> dict[str, str] | None:
    """The raw data chapter ``path`` glued (MyST-NB ``glue``), per key: its text/markdown where it
    was glued as Markdown, else its text/plain repr, read from its cached execution; None when the
    chapter is not cached."""
    notebook = cached_notebook(path)
    if notebook is None:
        return None
    data = {}
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            bundle = output.get("data", {})
            text = bundle.get(GLUE_MARKDOWN, bundle.get(GLUE_MIME))
            if name is not None and text is not None:
                data[name] = text
    return data


def glued_values(path: Path) -> dict[str, str] | None:
    """The values chapter ``path`` glued (MyST-NB ``glue``), as the text the book shows (strings
    without their quotes), read from its cached execution; None when it is not cached."""
    import ast

    data = glued_data(path)
    if data is None:
        return None
    values = {}
    for name, text in data.items():
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        values[name] = value if isinstance(value, str) else text
    return values
