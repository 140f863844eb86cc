"""tools/portability.py: the portability run's pure parts, on hand-made notebooks and results.

Glued values and claims are read from executed cells as MyST-NB writes them; a cell's outcome is
``ok`` or its error; the probe cell's reading is what took effect; results of several environments
combine into the claims and cells whose verdict differs and the numeric claims' spreads, which set
the exit status. No notebook is executed here.
"""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import portability as P  # noqa: E402


def glue_output(name, text):
    """A display_data output as ``myst_nb.glue(name, value, display=False)`` writes it."""
    prefix = "application/papermill.record/"
    return {"output_type": "display_data", "data": {prefix + "text/plain": text},
            "metadata": {"scrapbook": {"name": name, "mime_prefix": prefix}}}


def error_output(ename, evalue):
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []}


def code(source, outputs=(), count=1, tags=()):
    return {"cell_type": "code", "source": source, "outputs": list(outputs),
            "execution_count": count, "metadata": {"tags": list(tags)}}


PROBE = {"blas": [{"internal_api": "openblas", "architecture": "Haswell", "num_threads": 1,
                   "filepath": "/v/site-packages/numpy.libs/libscipy_openblas64_.so"},
                  {"internal_api": "openblas", "architecture": "Haswell", "num_threads": 1,
                   "filepath": "/v/site-packages/scipy.libs/libscipy_openblas.so"}],
         "aten": "AVX2", "torch_threads": 1, "mkl_cbwr": 2, "environ": {}}


def notebook(value="'0.9997'", status="'reproduced'", check=None):
    """A chapter after execution: a claim, a check cell (``check``: its error) and the probe."""
    return {"cells": [
        {"cell_type": "markdown", "source": "# A chapter"},
        code("import attnsvm as A\nA.claim('C1-1', x, ok)",
             [{"output_type": "stream", "name": "stdout", "text": "hi\n"},
              glue_output("C1-1", value), glue_output("C1-1-status", status),
              glue_output("n-runs", "100")]),
        code("# the check\nassert x > 0.99, x", [error_output(*check)] if check else []),
        code(P.PROBE, [{"output_type": "stream", "name": "stdout",
                        "text": P.PROBE_MARK + json.dumps(PROBE) + "\n"}], tags=[P.PROBE_TAG]),
    ]}


def result(env, value="'0.9997'", status="'reproduced'", check=None, **settings):
    """One environment's saved result: chapter ``ch01`` = :func:`notebook`, ``settings`` set."""
    return {"env": env, "settings": {**settings, "threads": 1}, "jobs": 2, "scale": "quick",
            "seconds": 12.0, "chapters": {"ch01": P.chapter_record(notebook(value, status, check),
                                                                  6.0)}}


def test_glued_values_are_the_text_the_book_shows():
    cells = notebook()["cells"]
    assert P.glued(cells) == {"C1-1": "0.9997", "C1-1-status": "reproduced", "n-runs": "100"}
    assert P.glue_text("np.float64(2.0)") == "np.float64(2.0)" and P.glue_text("'a b'") == "a b"
    assert P.claims(P.glued(cells)) == {"C1-1": ("0.9997", "reproduced")}


def test_numbers_are_read_out_of_the_text():
    assert P.numbers("0.98 [0.97, 0.99]") == [0.98, 0.97, 0.99]
    assert P.numbers("3 / 5, 1.5e-03, -2") == [3.0, 5.0, 1.5e-3, -2.0]
    assert P.numbers("not defined") == []


def test_each_code_cell_gets_an_outcome_and_checks_are_marked():
    record = P.chapter_record(notebook(check=("AssertionError", "0.95\nmore")), 3.0)
    assert [c["outcome"] for c in record["cells"]] == ["ok", "AssertionError: 0.95"]
    assert [c["check"] for c in record["cells"]] == [False, True]
    assert record["cells"][1]["label"] == "assert x > 0.99, x"
    assert record["effect"] == PROBE and record["seconds"] == 3.0
    assert P.verdict("AssertionError: 0.95") == "AssertionError" and P.verdict("ok") == "ok"


def test_a_dead_kernel_leaves_the_cells_after_it_not_run():
    nb = notebook()
    nb["cells"][2]["execution_count"] = None
    nb["cells"][3]["execution_count"], nb["cells"][3]["outputs"] = None, []
    record = P.chapter_record(nb, 1.0, failure="DeadKernelError: gone")
    assert [c["outcome"] for c in record["cells"]] == ["ok", "not run (DeadKernelError: gone)"]
    assert record["effect"] is None


def test_same_verdicts_give_exit_status_0_and_the_spreads():
    results = [result("native"), result("haswell", value="'0.9990'", check=("AssertionError", "b"))]
    results[0]["chapters"]["ch01"]["cells"][1]["outcome"] = "AssertionError: a"   # same verdict
    found = P.differences(results)
    assert found["claims"] == [] and found["cells"] == [] and P.exit_status(found) == 0
    [(key, width, relative, *values)] = found["spreads"]
    assert key == "ch01::C1-1" and abs(width - 7e-4) < 1e-12
    assert abs(relative - 7e-4 / 0.9997) < 1e-12


def test_a_changed_status_or_cell_verdict_is_listed_and_exits_1():
    results = [result("native"), result("zen", status="'differs'"),
               result("prescott", check=("AssertionError", "0.95"))]
    found = P.differences(results)
    assert found["claims"] == [["ch01::C1-1", "reproduced", "differs", "reproduced"]]
    assert found["cells"] == [["ch01", "Cell 1", "yes", "assert x > 0.99, x", "ok", "ok",
                               "AssertionError: 0.95"]]
    assert P.exit_status(found) == 1
    text = P.report(results, found, top=5)
    for part in ("(a) claims whose status differs: 1", "(b) cells whose verdict differs: 1",
                 "1 exactly 0", "(d) environments", "(e) seconds", "total: 36 s"):
        assert part in text, part
    row = (r"\nnative +- +Haswell \(numpy, scipy\) +- +AVX2 +- +AUTO +1 +1 / 1 \(numpy, scipy\)"
           r" +2\n")
    assert re.search(row, text), text


def test_what_took_effect_and_the_kernel_several_settings_share():
    haswell = result("haswell", OPENBLAS_CORETYPE="Haswell")
    zen = result("zen", OPENBLAS_CORETYPE="Zen")
    assert P.effect(haswell) == ["Haswell (numpy, scipy)", "AVX2", "AUTO", "1 / 1 (numpy, scipy)"]
    assert P.kernel_notes([haswell, zen]) == [
        "OPENBLAS_CORETYPE Haswell and Zen run the same kernel, Haswell (numpy, scipy)"]
    assert P.kernel_notes([haswell]) == []
    haswell["chapters"]["ch01"]["effect"] = None           # the probe cell did not run
    assert P.effect(haswell) == ["not measured"] * 4 and P.kernel_notes([haswell, zen]) == []


def test_spread_needs_the_same_count_of_numbers_everywhere():
    assert P.spread([[1.0, 2.0], [1.0, 2.5]]) == (0.5, 0.2, (2.0, 2.5))
    assert P.spread([[1.0], [1.0, 2.0]]) is None and P.spread([[], []]) is None
    assert P.spread([[0.0], [0.0]]) == (0.0, 0.0, (0.0, 0.0))


def test_a_claim_missing_in_one_environment_differs():
    results = [result("native"), result("zen")]
    del results[1]["chapters"]["ch01"]["glued"]["C1-1-status"]
    assert P.differences(results)["claims"] == [["ch01::C1-1", "reproduced", "missing"]]


def test_the_kernel_environment_replaces_every_knob(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("MKL_CBWR", "AVX")
    native = P.kernel_env("native")
    assert "OPENBLAS_CORETYPE" not in native and "MKL_CBWR" not in native
    assert native["OMP_NUM_THREADS"] == native["MKL_NUM_THREADS"] == "1"
    assert native["MPLBACKEND"] == "Agg"
    two = P.kernel_env("zen-default-2t")
    assert two["OPENBLAS_CORETYPE"] == "Zen" and two["OPENBLAS_NUM_THREADS"] == "2"
    assert list(P.ENVIRONMENTS)[0] == "native" and P.ENVIRONMENTS["native"] == ({}, 1)


def test_the_environments_cover_every_kernel_capability_mode_and_thread_count():
    settings = [dict(s, threads=t) for s, t in P.ENVIRONMENTS.values()]
    kernels = {s.get("OPENBLAS_CORETYPE") for s in settings}
    assert kernels >= {"Haswell", "SkylakeX", "Zen", "Prescott"}
    assert {s.get("ATEN_CPU_CAPABILITY") for s in settings} >= {"default", "avx2", "avx512"}
    assert {s.get("MKL_CBWR") for s in settings} >= {None, "COMPATIBLE", "AUTO"}
    assert {s["threads"] for s in settings} == {1, 2}


def test_chapters_leave_out_the_pages_that_read_the_execution_cache():
    names = [p.stem for p in P.chapters()]
    assert "ch01_model" in names and "numerics" in names
    assert "status" not in names and "report" not in names and "intro" not in names


def test_combine_only_reads_the_saved_environments(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(P, "OUT", tmp_path)
    for r in (result("native"), result("haswell-avx2", status="'differs'")):
        (tmp_path / f"{r['env']}.json").write_text(json.dumps(r))
    assert P.main(["--combine-only", "--env", "native", "haswell-avx2"]) == 1
    assert "ch01::C1-1  reproduced  differs" in capsys.readouterr().out
    assert P.main(["--combine-only", "--env", "native"]) == 0
    assert P.main(["--combine-only", "--env", "prescott-default"]) == 2


def test_the_execution_cache_is_an_environment_to_compare_with(monkeypatch, tmp_path):
    """``--against-cache``: the chapters as the book's execution cache holds them are a result
    named ``cache`` (probe absent: not measured); a chapter missing from the cache is an error."""
    import contextlib
    import nbformat

    chapter = tmp_path / "ch01.md"
    chapter.write_text("x")
    executed = nbformat.from_dict({"cells": notebook()["cells"][:3], "metadata": {},
                                   "nbformat": 4, "nbformat_minor": 5})

    class Record:
        pk, data = 7, {"execution_seconds": 3.5}

    class Cache:
        def match_cache_notebook(self, nb):
            if nb == "missing":
                raise KeyError(nb)
            return Record()

        def get_cache_bundle(self, pk):
            assert pk == 7
            return type("Bundle", (), {"nb": executed})()

    monkeypatch.setattr(P.notebook_cache, "locked_cache", lambda: contextlib.nullcontext(Cache()))
    monkeypatch.setattr(P.notebook_cache, "read_chapter", lambda path: "nb")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    cached = P.cached_result([chapter])
    assert cached["env"] == "cache" and cached["settings"]["OPENBLAS_CORETYPE"] == "Haswell"
    assert cached["chapters"]["ch01"]["glued"]["C1-1-status"] == "reproduced"
    assert cached["chapters"]["ch01"]["effect"] is None and cached["seconds"] == 3.5
    found = P.differences([cached, result("prescott", status="'differs'")])
    assert found["claims"] == [["ch01::C1-1", "reproduced", "differs"]] and P.exit_status(found) == 1
    monkeypatch.setattr(P.notebook_cache, "read_chapter", lambda path: "missing")
    with pytest.raises(SystemExit, match="not in the execution cache"):
        P.cached_result([chapter])


def test_parts_balance_the_chapters_costliest_first(tmp_path):
    """``--part i/k``: every chapter in exactly one part, each to the part with the least cost so far
    (sizes when the chapters are not all in the execution cache, as here; or the costs given)."""
    paths = []
    for name, size in (("a", 50), ("b", 40), ("c", 30), ("d", 20), ("e", 10)):
        paths.append(tmp_path / f"{name}.md")
        paths[-1].write_text("x" * size)
    parts = [P.part(paths, f"{i}/3") for i in range(3)]
    assert [[p.stem for p in q] for q in parts] == [["a"], ["b", "e"], ["c", "d"]]
    seconds = dict(zip(paths, (1.0, 2.0, 3.0, 90.0, 80.0)))       # cached run times win over sizes
    parts = [P.part(paths, f"{i}/2", seconds) for i in range(2)]
    assert [[p.stem for p in q] for q in parts] == [["d"], ["a", "b", "c", "e"]]
    for bad in ("3/3", "1", "x/2"):
        with pytest.raises(SystemExit, match="--part"):
            P.part(paths, bad)
