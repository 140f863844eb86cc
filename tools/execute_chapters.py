"""Execute the book's chapters that the execution cache lacks, several at a time (``make book``).

    python tools/execute_chapters.py [--jobs N] book/ch01_model.md book/ch02_... .md

Each chapter runs in its own kernel, from a fresh start, in its own directory, exactly as MyST-NB
would run it; a chapter that runs without error is stored with its outputs and per-cell run times
in ``_build/.jupyter_cache`` (see ``tools/notebook_cache.py``), so that the Sphinx build that follows
renders it without executing it again. Chapters already cached for the current code and
fingerprint (for example by ``make test``) are skipped. Pages whose front matter asks MyST-NB to
execute them on every build (``execution_mode: force``, the Build status page) are left to it.

Every failing chapter is reported with its traceback; the exit status is 1 if any failed.
``--jobs`` defaults to the number of CPU cores (at most 2 kernels per 2 cores, each with one
thread: set ``OMP_NUM_THREADS=1``, as the Makefile does).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbclient
from nbclient.exceptions import CellExecutionError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import notebook_cache  # noqa: E402

CELL_TIMEOUT = 3600     # seconds: a guard against a hung kernel, far above any cell's run time


def forced(path: Path) -> bool:
    """True when the page's front matter makes MyST-NB execute it on every build."""
    return notebook_cache.read_chapter(path).metadata.get("mystnb", {}).get("execution_mode") == "force"


def execute(path: Path) -> tuple[str, float, str | None]:
    """Run one chapter and cache it; returns (name, seconds, error text or None)."""
    read = notebook_cache.read_chapter(path)
    notebook = copy.deepcopy(read)                   # executed; `read` keeps the source's metadata
    client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    outputs, seconds = [], []
    start = time.perf_counter()
    try:
        with client.setup_kernel():
            for index, cell in enumerate(notebook.cells):
                if cell.cell_type != "code":
                    continue
                began = time.perf_counter()
                client.execute_cell(cell, index)
                seconds.append(time.perf_counter() - began)
                outputs.append(cell.outputs)
    except CellExecutionError as error:
        return path.name, time.perf_counter() - start, str(error)
    notebook_cache.store(path, read, outputs, seconds, producer="tools/execute_chapters.py (make book)")
    return path.name, time.perf_counter() - start, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="+", type=Path)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    todo = []
    with notebook_cache.locked_cache() as cache:                   # empties a stale cache
        for path in args.chapters:
            if not forced(path) and notebook_cache.cached_record(
                    cache, notebook_cache.read_chapter(path)) is None:
                todo.append(path)
    cached = len(args.chapters) - len(todo)
    print(f"execute_chapters: {len(todo)} to execute, {cached} cached or executed by the build itself",
          flush=True)
    failed = []
    start = time.perf_counter()
    # the longest chapters first, by source size, so that the two workers finish together
    todo.sort(key=lambda p: -p.stat().st_size)
    with ProcessPoolExecutor(max(1, min(args.jobs, len(todo) or 1))) as pool:
        for future in as_completed([pool.submit(execute, path) for path in todo]):
            name, seconds, error = future.result()
            print(f"  {name}: {seconds:6.1f} s  {'FAILED' if error else 'ok'}", flush=True)
            if error:
                failed.append((name, error))
    print(f"execute_chapters: {len(todo)} chapters in {time.perf_counter() - start:.1f} s "
          f"with {args.jobs} at a time", flush=True)
    for name, error in failed:
        print(f"\n=== {name} failed ===\n{error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
