"""Benchmark: each heavy chapter executed before and after a change, side by side.

    python bench/bench_chapters.py                       # the heavy chapters, before = BEFORE below
    python bench/bench_chapters.py --before HEAD~5 book/ch03b_reproducing_paper_a.md
    python bench/bench_chapters.py book/ch05_overparameterization.md+book/ch05b_a4_replication.md

For every chapter named, the script executes the chapter twice in fresh kernels, one thread each
(``OMP_NUM_THREADS=1``, as ``make book`` runs them), one run at a time: once from a temporary
``git worktree`` of the ``--before`` revision (its ``lib/`` put first on ``PYTHONPATH``, the
chapter's directory as working directory) and once from this checkout. It prints each chapter's
total and slowest cell on both sides with the ratios before / after. Nothing is cached or
rendered. ``a.md+b.md`` times a chapter and the page split off from it as one (the sum of their
totals, the slower of their slowest cells); a page that does not exist at the ``--before`` revision
counts as absent there. Each chapter is executed in full: the whole benchmark takes about twice the
chapters' build time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jupytext
import nbclient

ROOT = Path(__file__).resolve().parents[1]
# the revision before the last round of build-time work (the path and A4 step loops, the training
# core, A6, norm_svm's compiled problems, cvxpy imported on first use); the rounds before it started
# at 672551e and bad9227
BEFORE = "d659198"
HEAVY = ["book/ch03b_reproducing_paper_a.md", "book/ch05_overparameterization.md+book/ch05b_a4_replication.md",
         "book/ch06_nonlinear_heads.md", "book/ch10_digits_transformer.md", "book/ch09_optimizer_norms.md",
         "book/ch02_regularization_path.md", "book/ch03_kq_vs_w.md", "book/ch08_sequences.md"]


def run_chapter(path: Path, lib: Path) -> tuple[float, float]:
    """Execute the text notebook ``path`` with ``lib`` first on the import path: (total, slowest
    cell) in seconds."""
    notebook = jupytext.read(str(path))
    saved = {key: os.environ.get(key) for key in ("PYTHONPATH", "OMP_NUM_THREADS", "MPLBACKEND")}
    os.environ.update(PYTHONPATH=str(lib), OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    try:
        client = nbclient.NotebookClient(notebook, timeout=3600, kernel_name="python3",
                                         resources={"metadata": {"path": str(path.parent)}})
        seconds = []
        with client.setup_kernel():
            for index, cell in enumerate(notebook.cells):
                if cell.cell_type == "code":
                    began = time.perf_counter()
                    client.execute_cell(cell, index)
                    seconds.append(time.perf_counter() - began)
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.update({key: value})
    return sum(seconds), max(seconds, default=0.0)


def run_pages(tree: Path, pages: list[Path]) -> tuple[float, float] | None:
    """Total and slowest cell of the pages that exist in ``tree`` (None if none does)."""
    runs = [run_chapter(tree / page, tree / "lib") for page in pages if (tree / page).exists()]
    return (sum(t for t, _ in runs), max(c for _, c in runs)) if runs else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", default=HEAVY, help="book/x.md or book/x.md+book/y.md")
    parser.add_argument("--before", default=BEFORE, help=f"git revision (default {BEFORE})")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="attnsvm-before-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree),
                        args.before], check=True)
        try:
            for group in args.chapters:
                pages = [Path(page).resolve().relative_to(ROOT) for page in group.split("+")]
                name = "+".join(page.stem for page in pages)
                before, after = run_pages(tree, pages), run_pages(ROOT, pages)
                if after is None:
                    raise SystemExit(f"bench_chapters: {group} does not exist in this checkout")
                rows.append((name, before, after))
                print(f"  {name}: before {'absent' if before is None else f'{before[0]:.1f} s'}, "
                      f"after {after[0]:.1f} s", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           check=False)
    print(f"\nchapters executed before ({args.before}) and after (this checkout), one thread each")
    width = max([len("chapter")] + [len(name) for name, *_ in rows])
    print(f"{'chapter':{width}s} {'before s':>9s} {'after s':>8s} {'ratio':>6s}   "
          f"{'slowest cell before':>19s} {'after':>6s} {'ratio':>6s}")
    for name, before, after in rows:
        if before is None:
            print(f"{name:{width}s} {'absent':>9s} {after[0]:8.1f} {'':>6s}   {'':>19s} {after[1]:6.1f}")
            continue
        print(f"{name:{width}s} {before[0]:9.1f} {after[0]:8.1f} {before[0] / after[0]:6.2f}   "
              f"{before[1]:19.1f} {after[1]:6.1f} {before[1] / after[1]:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
