"""The reproduction report (book/report.md) lists every claim and pastes only computed values.

Static checks (the executed build then resolves every pasted value, or fails on a missing one):
every experiment id of the papers has a row; every value and status pasted from a chapter is one
that chapter records with ``A.book.claim``; every claim and every numbered check of a chapter has a row.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "book" / "report.md"
# The experiments of both papers the book reproduces (paper A: A1-A6, paper B: B1-B4, and the
# small real transformer V1), and the two theorems' regularization paths.
PAPER_IDS = ["A1", "A2", "A3", "A4", "A5", "A6", "B1", "B2", "B3", "B4", "V1", "T1", "T2"]
PASTE = re.compile(r"\{glue:text\}`([\w./-]+)::([\w.-]+):s`")
CLAIM = re.compile(r"""A\.claim\(\s*["']([\w.-]+)["']""")
CHECK_LABEL = re.compile(r"^\((check-\d+b?-\d+)\)=", re.M)


def _chapters():
    pages = [*(ROOT / "book").glob("ch*.md"), ROOT / "book" / "numerics.md"]
    return {p.name: p.read_text() for p in pages}


def test_report_is_in_the_table_of_contents():
    assert "file: book/report" in (ROOT / "_toc.yml").read_text()


def test_every_paper_id_has_a_row():
    rows = [line for line in REPORT.read_text().splitlines() if line.startswith("| ")]
    ids = {line.split("|")[1].strip() for line in rows}
    assert set(PAPER_IDS) <= ids, sorted(set(PAPER_IDS) - ids)


def test_pasted_values_are_claims_of_their_chapter():
    chapters = _chapters()
    pasted = PASTE.findall(REPORT.read_text())
    assert len(pasted) > 40
    for doc, key in pasted:
        if doc == "status.md":
            assert f'glue("{key}"' in (ROOT / "book" / doc).read_text()
            continue
        assert doc in chapters, f"{doc} is not a chapter"
        claim = key.removesuffix("-status").removesuffix("-note")
        text = chapters[doc]          # a key may be chosen in code, e.g. {"A1": "T1-A1"}[name]
        assert "book.claim(" in text and f'"{claim}"' in text, f"{doc} never claims {claim!r}"


def test_report_counts_its_status_words():
    """The report glues this build's count of each status word, from its own rows (book/report.md's
    counting cell) and explains every word the library's attnsvm.book.claim can return."""
    import attnsvm as A

    report = REPORT.read_text()
    assert "{glue:text}`report-counts:s`" in report and 'glue("report-counts"' in report
    assert "execution_mode: force" in report.split("---")[1]      # re-counted on every build
    for word in A.book.report.STATUS:
        assert f"- `{word}`:" in report, f"the legend does not explain {word!r}"


def test_paper_rows_name_their_source_and_protocol():
    lines = REPORT.read_text().splitlines()
    headers = [line for line in lines if line.startswith("| id | claim |")]
    assert headers and all(h == "| id | claim | paper's value | ours | status | criterion | source | "
                               "protocol | where |" for h in headers), headers
    notes = set(re.findall(r"^- \*\*(P\d+)\.\*\* \S", "\n".join(lines), re.M))
    used = set()
    for line in lines:
        if re.match(r"^\| [ABTV]\d", line):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            assert len(cells) == 9 and re.fullmatch(r"P\d+", cells[7]), line[:60]
            used.add(cells[7])
    assert used == notes, (sorted(used ^ notes))      # every protocol named is listed, and used


def test_every_claim_and_numbered_check_has_a_row():
    report = REPORT.read_text()
    pasted = {(doc, key) for doc, key in PASTE.findall(report)}
    for name, text in _chapters().items():
        for claim in CLAIM.findall(text):
            assert (name, claim) in pasted and (name, f"{claim}-status") in pasted, (name, claim)
        for label in CHECK_LABEL.findall(text):
            assert f"<{label}>" in report, f"{name}: {label} has no row in the report"
