"""Portability run: every chapter under several arithmetic environments; does any verdict change?

    python tools/portability.py [--env NAME ...] [--chapters book/ch01_model.md ...] [--jobs N]
                                [--combine-only] [--against-cache] [--part I/K] [--top N]

Each of :data:`ENVIRONMENTS` stands for another machine: the OpenBLAS kernel of NumPy, SciPy and
the solvers (``OPENBLAS_CORETYPE``), PyTorch's vectorization (``ATEN_CPU_CAPABILITY``), MKL's mode
for torch's matrix products (``MKL_CBWR``), the threads. They are read at process start, so each
chapter runs in a fresh kernel with them set (the rest of them removed; ``native``: one thread,
as ``make test``); a cell appended to it measures there what took effect. Every cell runs, errors
included, so that each check cell (an ``assert``) gets an outcome; glued values are recorded,
claims (``attnsvm.book.claim``: ``key`` and ``key-status``) among them. Results go to
``_build/portability/<env>.json``, never to the book's execution cache (``--combine-only``
compares saved ones; ``--against-cache`` compares with the chapters as the book's execution cache
holds them, as ``make test`` executed them); the report lists the claims whose status and the cells whose verdict (ok or
the error's name) differ, every numeric claim's spread, what took effect and the times. Exit
status 1 when a status or verdict differs. ``ATTNSVM_SCALE`` passes through. The pages that read
the book's execution cache (status, report) are left out: their verdicts depend on it.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import notebook_cache  # noqa: E402

ROOT = notebook_cache.ROOT
OUT = ROOT / "_build" / "portability"
CELL_TIMEOUT = 3600     # seconds: a guard against a hung kernel, as in tools/execute_chapters.py
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
KNOBS = ("OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY", "MKL_CBWR") + THREAD_VARS
# name -> (settings, threads); together: the 4 OpenBLAS kernels, the 3 ATen capabilities, MKL_CBWR
# unset / COMPATIBLE / AUTO (the bundled MKL honours no other), 1 and 2 threads. The first is native (what `make test` runs).
ENVIRONMENTS: dict[str, tuple[dict[str, str], int]] = {
    "native": ({}, 1),
    "skylakex-avx512-2t": ({"OPENBLAS_CORETYPE": "SkylakeX", "ATEN_CPU_CAPABILITY": "avx512"}, 2),
    "haswell-avx2": ({"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2",
                      "MKL_CBWR": "AUTO"}, 1),
    "zen-default-2t": ({"OPENBLAS_CORETYPE": "Zen", "ATEN_CPU_CAPABILITY": "default",
                        "MKL_CBWR": "COMPATIBLE"}, 2),
    "prescott-default": ({"OPENBLAS_CORETYPE": "Prescott", "ATEN_CPU_CAPABILITY": "default",
                          "MKL_CBWR": "COMPATIBLE"}, 1),
}
PROBE_TAG = "portability-probe"
PROBE_MARK = "PORTABILITY-PROBE "
# What took effect, measured in the kernel; mkl_serv_cbwr_get is the bundled MKL's own reading of
# MKL_CBWR (MKL's public mkl_cbwr_get is not exported by libtorch_cpu).
PROBE = f'''import ctypes as _ct, json as _js, os as _os
import numpy, scipy.linalg, threadpoolctl as _tp, torch as _to
def _cbwr():
    try:
        lib = _os.path.join(_os.path.dirname(_to.__file__), "lib", "libtorch_cpu.so")
        get = _ct.CDLL(lib).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    get.restype, get.argtypes = _ct.c_int, [_ct.c_int]
    return get(1)
print({PROBE_MARK!r} + _js.dumps({{
    "blas": [{{k: i.get(k) for k in ("internal_api", "filepath", "architecture", "num_threads")}}
             for i in _tp.threadpool_info() if i["user_api"] == "blas"],
    "aten": _to.backends.cpu.get_cpu_capability(), "torch_threads": _to.get_num_threads(),
    "mkl_cbwr": _cbwr(), "environ": {{k: v for k, v in sorted(_os.environ.items())
                                     if k.startswith(("OPENBLAS_", "MKL_", "ATEN_", "OMP_"))}}}}))
'''
CBWR_NAMES = {1: "off", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 9: "AVX", 10: "AVX2", 12: "AVX512"}
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def chapters() -> list[Path]:
    """The book's text notebooks (as the Makefile's CHAPTERS), less those reading its cache."""
    return [p for p in sorted((ROOT / "book").glob("*.md")) if notebook_cache.is_text_notebook(p)
            and "notebook_cache" not in p.read_text(encoding="utf-8")]


def run_cost(paths: list[Path]) -> dict[Path, float]:
    """Each chapter's cost: its cells' seconds in the execution cache when every chapter is
    there (as in CI, after ``make test``), else its source size."""
    with notebook_cache.locked_cache(clear_stale=False) as cache:
        records = [None if cache is None else
                   notebook_cache.cached_record(cache, notebook_cache.read_chapter(p)) for p in paths]
    seconds = [None if r is None else r.data.get("cell_seconds") for r in records]
    if all(s is not None for s in seconds):
        return {p: float(sum(s)) for p, s in zip(paths, seconds)}
    return {p: float(p.stat().st_size) for p in paths}


def part(paths: list[Path], spec: str, cost: dict[Path, float] | None = None) -> list[Path]:
    """Part ``i`` of ``k`` (``spec`` = ``"i/k"``, 0 <= i < k) of the chapters: the costliest first,
    each to the part with the least cost so far (ties: the lower part), so that the parts take
    about as long. ``cost``: :func:`run_cost` unless given."""
    try:
        i, k = (int(x) for x in spec.split("/"))
    except ValueError:
        raise SystemExit(f"portability: --part must be i/k (e.g. 0/3), got {spec!r}") from None
    if not 0 <= i < k:
        raise SystemExit(f"portability: --part {spec}: need 0 <= i < k")
    cost = run_cost(paths) if cost is None else cost
    loads, members = [0.0] * k, [[] for _ in range(k)]
    for path in sorted(paths, key=lambda p: (-cost[p], p.name)):
        lightest = min(range(k), key=lambda j: (loads[j], j))
        loads[lightest] += cost[path]
        members[lightest].append(path)
    return sorted(members[i])


def kernel_env(name: str) -> dict[str, str]:
    """The parent's environment with every knob removed, then environment ``name``'s set."""
    settings, threads = ENVIRONMENTS[name]
    env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    return {**env, **settings, **dict.fromkeys(THREAD_VARS, str(threads)), "MPLBACKEND": "Agg"}


def glue_text(text: str) -> str:
    """A glued value's text/plain repr as the book shows it (a string without its quotes)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return value if isinstance(value, str) else text


def numbers(text: str) -> list[float]:
    """Every number written in ``text`` ("0.98 [0.97, 0.99]" -> three), in order."""
    return [float(m) for m in NUMBER.findall(text)]


def glued(cells: list) -> dict[str, str]:
    """name -> text of every value glued by the executed ``cells`` (MyST-NB display_data)."""
    values = {}
    for cell in cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            plain = [v for k, v in output.get("data", {}).items() if k.endswith("text/plain")]
            if name is not None and plain:
                values[name] = glue_text(plain[0])
    return values


def claims(values: dict[str, str]) -> dict[str, tuple[str, str]]:
    """key -> (value, status) of each claim among glued ``values`` (``key`` and ``key-status``)."""
    return {k[:-7]: (values[k[:-7]], v) for k, v in values.items()
            if k.endswith("-status") and k[:-7] in values}


def first_line(text: str) -> str:
    """The first non-empty line of ``text`` (an error message), stripped."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def label(source: str) -> str:
    """A cell's first ``assert`` line (or its first line): its name in the report."""
    asserts = [line.strip() for line in source.splitlines() if line.strip().startswith("assert")]
    return asserts[0] if asserts else first_line(source)


def outcome(cell: dict) -> str:
    """``ok``, or the error's name and the first line of its message."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"{output['ename']}: {first_line(output.get('evalue', ''))}"
    return "ok"


def verdict(result: str) -> str:
    """What a cell's outcome decides: ``ok`` or the error's name (its message may hold numbers)."""
    return result.split(":", 1)[0]


def chapter_record(notebook: dict, seconds: float, failure: str | None = None) -> dict:
    """One executed chapter: its glued values, each code cell's outcome and what took effect.
    ``failure`` (a kernel that died or hung) marks the cells it left unexecuted as not run."""
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    own = [c for c in code if PROBE_TAG not in c.get("metadata", {}).get("tags", [])]
    printed = [o["text"] for c in code[len(own):] for o in c.get("outputs", [])   # the probe: last
               if o.get("output_type") == "stream" and PROBE_MARK in o.get("text", "")]
    measured = json.loads(printed[0].split(PROBE_MARK, 1)[1].splitlines()[0]) if printed else None
    names = [label(c["source"]) for c in own]
    cells = [{"cell": i, "check": names[i].startswith("assert"), "label": names[i],
              "outcome": f"not run ({failure})" if failure and c.get("execution_count") is None
              else outcome(c)} for i, c in enumerate(own)]
    return {"seconds": round(seconds, 2), "glued": glued(code), "cells": cells, "effect": measured}


def execute(path: Path, name: str) -> tuple[str, dict]:
    """Run chapter ``path`` in a fresh kernel under environment ``name``, every cell, errors too."""
    import nbclient

    notebook = copy.deepcopy(notebook_cache.read_chapter(path))
    notebook.cells.append(nbformat.v4.new_code_cell(PROBE, metadata={"tags": [PROBE_TAG]}))
    client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     allow_errors=True,
                                     resources={"metadata": {"path": str(path.parent)}})
    start, failure = time.perf_counter(), None
    try:
        with client.setup_kernel(env=kernel_env(name)):
            for index, cell in enumerate(notebook.cells):
                if cell.cell_type == "code":
                    client.execute_cell(cell, index)
    except Exception as error:          # a dead or hung kernel: the cells left are not run
        failure = f"{type(error).__name__}: {first_line(str(error))}"
    return path.stem, chapter_record(notebook, time.perf_counter() - start, failure)


def run_environment(name: str, paths: list[Path], jobs: int | None) -> dict:
    """Every chapter under environment ``name``, ``jobs`` at a time (default: cores / threads),
    saved to ``OUT/<name>.json``."""
    settings, threads = ENVIRONMENTS[name]
    jobs = jobs or max(1, (os.cpu_count() or 1) // threads)
    print(f"portability: {name}: {len(paths)} chapters, {jobs} at a time", flush=True)
    start, records = time.perf_counter(), {}
    paths = sorted(paths, key=lambda p: -p.stat().st_size)      # the longest first
    with ProcessPoolExecutor(max(1, min(jobs, len(paths)))) as pool:
        for future in as_completed([pool.submit(execute, path, name) for path in paths]):
            stem, record = future.result()
            bad = sum(verdict(c["outcome"]) != "ok" for c in record["cells"])
            print(f"  {stem}: {record['seconds']:7.1f} s  {bad} cells failed", flush=True)
            records[stem] = record
    result = {"env": name, "settings": {**settings, "threads": threads}, "jobs": jobs,
              "scale": os.environ.get("ATTNSVM_SCALE", "").strip().lower() or "paper",
              "seconds": round(time.perf_counter() - start, 2),
              "chapters": dict(sorted(records.items()))}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=1))
    return result


def cached_result(paths: list[Path]) -> dict:
    """The chapters as the book's execution cache holds them (executed by ``make test`` or
    ``make book`` in this shell's environment), as the result of an environment named ``cache``:
    a run under one environment is then compared with the build without executing it again."""
    records = {}
    with notebook_cache.locked_cache() as cache:              # a stale cache is emptied
        for path in paths:
            found = None if cache is None else notebook_cache.cached_record(
                cache, notebook_cache.read_chapter(path))
            if found is None:
                raise SystemExit(f"portability: {path.name} is not in the execution cache "
                                 "(run make test or make book first)")
            records[path.stem] = chapter_record(cache.get_cache_bundle(found.pk).nb,
                                                found.data.get("execution_seconds", 0.0))
    settings = {k: os.environ[k] for k in KNOBS[:3] if k in os.environ}
    return {"env": "cache", "settings": {**settings, "threads": os.environ.get("OMP_NUM_THREADS", "-")},
            "jobs": "-", "scale": os.environ.get("ATTNSVM_SCALE", "").strip().lower() or "paper",
            "seconds": round(sum(r["seconds"] for r in records.values()), 2),
            "chapters": dict(sorted(records.items()))}


def spread(values: list[list[float]]) -> tuple[float, float, tuple[float, ...]] | None:
    """(absolute, relative, its values) for the number that spreads most across environments,
    relative to its largest magnitude; None unless every environment wrote as many numbers."""
    if not values or not values[0] or len({len(v) for v in values}) != 1:
        return None
    spreads = [(max(c) - min(c), (max(c) - min(c)) / max(map(abs, c)) if any(c) else 0.0, c)
               for c in zip(*values)]
    return max(spreads, key=lambda s: s[1])


def differences(results: list[dict]) -> dict:
    """Claims whose status differs, cells whose verdict differs and each numeric claim's spread,
    over the chapters every environment ran."""
    common = sorted(set.intersection(*(set(r["chapters"]) for r in results)))
    found = {"claims": [], "cells": [], "spreads": [], "chapters": common}
    for chapter in common:
        per_env = [claims(r["chapters"][chapter]["glued"]) for r in results]
        for key in sorted(set().union(*per_env)):
            got = [c.get(key, ("", "missing")) for c in per_env]
            if len({status for _, status in got}) > 1:
                found["claims"].append([f"{chapter}::{key}"] + [status for _, status in got])
            width = spread([numbers(value) for value, _ in got])
            if width is not None:
                found["spreads"].append([f"{chapter}::{key}", width[0], width[1],
                                         *(f"{x:g}" for x in width[2])])
        cells = [r["chapters"][chapter]["cells"] for r in results]
        for index in range(max(len(c) for c in cells)):
            got = [c[index] if index < len(c) else {"outcome": "missing"} for c in cells]
            if len({verdict(g["outcome"]) for g in got}) > 1:
                first = next(g for g in got if "label" in g)
                found["cells"].append([chapter, f"Cell {index}", "yes" if first["check"] else "no",
                                       first["label"]] + [g["outcome"] for g in got])
    found["spreads"].sort(key=lambda row: -row[2])
    return found


def exit_status(found: dict) -> int:
    """1 when a claim's status or a cell's verdict differs between environments, else 0."""
    return 1 if found["claims"] or found["cells"] else 0


def blas_libraries(probe: dict, key: str = "architecture") -> dict[str, str]:
    """Library (named by its package: numpy, scipy, scs) -> its kernel (or another ``key``)."""
    return {Path(lib["filepath"]).parent.name.removesuffix(".libs"):
            str(lib[key] or lib["internal_api"]) for lib in probe["blas"]}


def grouped(by_library: dict[str, str]) -> str:
    """{"numpy": "Haswell", "scipy": "Haswell", "scs": "Zen"} -> "Haswell (numpy, scipy); Zen (scs)"
    """
    groups: dict[str, list[str]] = {}
    for library, value in sorted(by_library.items()):
        groups.setdefault(value, []).append(library)
    return "; ".join(f"{value} ({', '.join(names)})" for value, names in sorted(groups.items()))


def effect(result: dict) -> list[str]:
    """What took effect in an environment's kernels, as the columns of report (d): OpenBLAS
    kernels, ATen capability, MKL's reading of MKL_CBWR, threads (chapters that disagree: a | b)."""
    seen = []
    for record in result["chapters"].values():
        probe = record["effect"]
        seen.append(("not measured",) * 4 if probe is None else (
            grouped(blas_libraries(probe)), probe["aten"],
            str(CBWR_NAMES.get(probe["mkl_cbwr"], probe["mkl_cbwr"])),
            f"{probe['torch_threads']} / {grouped(blas_libraries(probe, 'num_threads'))}"))
    return [" | ".join(sorted(set(column))) for column in zip(*seen)] or ["no chapter"] * 4


def kernel_notes(results: list[dict]) -> list[str]:
    """A line for each OpenBLAS kernel that several OPENBLAS_CORETYPE values ran (Zen: Haswell)."""
    asked: dict[tuple[str, str], set[str]] = {}
    for result in results:
        for record in result["chapters"].values():
            for package, kernel in blas_libraries(record["effect"] or {"blas": []}).items():
                asked.setdefault((kernel, package), set()).add(
                    result["settings"].get("OPENBLAS_CORETYPE", "unset"))
    same: dict[str, list[str]] = {}
    for (kernel, package), wanted in sorted(asked.items()):
        if len(wanted) > 1:
            same.setdefault(f"OPENBLAS_CORETYPE {' and '.join(sorted(wanted))} run the same "
                            f"kernel, {kernel}", []).append(package)
    return [f"{line} ({', '.join(packages)})" for line, packages in same.items()]


def environment_row(result: dict) -> list:
    """Report (d)'s row: each knob as it was set, then as it took effect."""
    settings = result["settings"]
    asked = [settings.get(k, "-") for k in KNOBS[:3]] + [settings["threads"]]
    pairs = [x for pair in zip(asked, effect(result)) for x in pair]
    return [result["env"], *pairs, result["jobs"]]


def table(header: list[str], rows: list[list]) -> str:
    """Rows as aligned text columns (numbers in short scientific form)."""
    text = [[f"{x:.2e}" if isinstance(x, float) else str(x) for x in row]
            for row in [header] + rows]
    widths = [max(len(row[i]) for row in text) for i in range(len(header))]
    lines = ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in text]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths)] + lines[1:])


def report(results: list[dict], found: dict, top: int) -> str:
    """The portability table: (a) claims, (b) cells, (c) spreads, (d) environments, (e) times."""
    names = [r["env"] for r in results]
    zero = sum(row[1] == 0 for row in found["spreads"])
    parts = [
        f"Portability run: {len(names)} environments, {len(found['chapters'])} chapters "
        f"({', '.join(found['chapters'])}), scale {results[0]['scale']}",
        f"(a) claims whose status differs: {len(found['claims'])}",
        table(["claim"] + names, found["claims"]) if found["claims"] else "",
        f"(b) cells whose verdict differs: {len(found['cells'])}",
        table(["chapter", "cell", "check", "first line (assert)"] + names, found["cells"])
        if found["cells"] else "",
        f"(c) spread of the {len(found['spreads'])} numeric claims across environments: {zero} "
        f"exactly 0; the {min(top, len(found['spreads']))} largest (relative):",
        table(["claim", "max - min", "relative"] + names, found["spreads"][:top]),
        "(d) environments: what was set, and what took effect (measured in each kernel)",
        table(["env", "OPENBLAS_CORETYPE", "-> kernel", "ATEN_CPU_CAPABILITY", "-> ATen",
               "MKL_CBWR", "-> MKL reads", "threads", "-> torch / BLAS", "jobs"],
              [environment_row(r) for r in results]),
        "\n".join(kernel_notes(results)),
        "(e) seconds per chapter and environment",
        table(["chapter"] + names, [[c] + [f"{r['chapters'][c]['seconds']:.0f}" for r in results]
                                    for c in found["chapters"]]
              + [["environment (wall)"] + [f"{r['seconds']:.0f}" for r in results]]),
        f"total: {sum(r['seconds'] for r in results):.0f} s",
        "a verdict differs between environments" if exit_status(found)
        else "every claim status and cell verdict agree across the environments",
    ]
    return "\n\n".join(p for p in parts if p)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", nargs="+", choices=list(ENVIRONMENTS), default=list(ENVIRONMENTS))
    parser.add_argument("--chapters", nargs="+", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=None, help="chapters at a time (default: "
                        "the cores divided by the environment's threads)")
    parser.add_argument("--combine-only", action="store_true",
                        help="run nothing: combine the saved results of --env")
    parser.add_argument("--top", type=int, default=15, help="numeric claims listed in (c)")
    parser.add_argument("--against-cache", action="store_true",
                        help="compare with the chapters as the book's execution cache holds them")
    parser.add_argument("--part", help="i/k: run part i of k of the chapters (e.g. 0/3)")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.chapters or chapters()]
    paths = part(paths, args.part) if args.part else paths
    if not args.combine_only:
        for name in args.env:
            run_environment(name, paths, args.jobs)
    missing = [name for name in args.env if not (OUT / f"{name}.json").exists()]
    if missing:
        print(f"portability: nothing saved in {OUT} for {', '.join(missing)}", file=sys.stderr)
    results = [json.loads((OUT / f"{n}.json").read_text()) for n in args.env if n not in missing]
    if args.against_cache:
        results.insert(0, cached_result(paths))
    if len(results) == 1:
        print("portability: one environment, nothing to compare it with", file=sys.stderr)
    if not results:
        return 2
    if len({r["scale"] for r in results}) > 1:
        print("portability: the saved environments ran at different scales", file=sys.stderr)
        return 2
    found = differences(results)
    print(report(results, found, args.top))
    return exit_status(found)


if __name__ == "__main__":
    sys.exit(main())
