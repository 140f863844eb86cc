"""The book's Sphinx setup renders math offline, folds solutions and writes clean pages.

Builds a two-page book with the repository's own ``_config.yml``, ``book/_ext`` and ``book/_static``
(execution off, same strict flags as ``make book``) in a temporary folder, then reads the HTML:
MathJax must come from the book's ``_static/`` and no page may point at a CDN; every inline script
(``const THEBE_JS_URL = ...`` among them) appears once per page; the print stylesheet is linked.
The same book built as one page (``--builder singlehtml``, what ``make pdf`` prints) must render
theorems and link its stylesheets, scripts and figures. An incremental build re-executes the status
page, and every notebook after a change of ``ATTNSVM_SCALE``. The search page loads the script that
makes snippets show formulas as text, and (in Chromium, over http) a snippet has no TeX left; in
a 390 px frame a notation table is read row by row and fits the screen.
"""

import base64
import functools
import http.server
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LOCAL_MATHJAX = re.compile(r'<script[^>]*src="([^"]*_static/mathjax/tex[^"]*\.js)"')
REMOTE_MATHJAX = re.compile(r"cdn\.jsdelivr|https?://[^\"' ]*mathjax", re.IGNORECASE)
INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
LOCAL_URL = re.compile(r'(?:src|href)="(?!https?:|#|data:|mailto:)([^"?#]+)')
SNIPPET_TEX = re.compile(r"\\[a-zA-Z]+|\\[()\[\]]|\$|[{}^]")
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==")

PAGE = """# A page with math

Inline $x^2$ and display math:

$$
\\sum_{t=1}^T \\mathbb{S}(X W z)_t = 1
$$

```{exercise}
:label: ex-probe
What is $1 + 1$?
```

```{solution} ex-probe
$2$.
```

```{prf:definition} A probe
:label: def-probe
A definition, numbered like the book's.
```

![a dot](dot.png)
"""


# a notation table as book/notation.md writes them, and a script that records, once MathJax has
# typeset, how wide the table and the page are (read back from the DOM by the phone-width test)
OTHER_PAGE = """# Another page

With $\\alpha$ and no code.

:::{container} notation-table
| symbol | meaning |
|---|---|
| $n$ | number of training examples |
| $\\mathcal{L}(W) = \\frac1n \\sum_{i} \\ell\\big(Y_i f(X_i)\\big) = \\frac1n \\sum_{i} \\ell\\big(Y_i v^\\top X_i^\\top \\mathbb{S}(X_i W z_i)\\big)$ | the empirical risk, a long meaning that wraps |
:::

<script>
window.addEventListener("load", () => setTimeout(() => {
  const table = document.querySelector(".notation-table table");
  const report = window.top.document.body;     // the phone test's frame holder, or this page
  report.setAttribute("data-table-right", Math.ceil(table.getBoundingClientRect().right));
  report.setAttribute("data-table-hidden", table.scrollWidth - table.clientWidth);
  report.setAttribute("data-page-width", document.documentElement.scrollWidth);
}, 4000));
</script>
"""

def _build_minimal_book(root: Path, builder: str = "html") -> Path:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    (root / "_config.yml").write_text(yaml.safe_dump(config))
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: book/page\nchapters:\n  - file: book/other\n"
    )
    shutil.copytree(ROOT / "book" / "_ext", root / "book" / "_ext")
    (root / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "notebook_cache.py", root / "tools")    # used by _ext/reexecute
    shutil.copy(ROOT / "tools" / "build_info.py", root / "tools")        # the one-page book's cover
    shutil.copytree(ROOT / "book" / "_static", root / "book" / "_static")
    shutil.copy(ROOT / "book" / "references.bib", root / "book" / "references.bib")
    (root / "book" / "page.md").write_text(PAGE)
    (root / "book" / "dot.png").write_bytes(PNG)
    (root / "book" / "other.md").write_text(OTHER_PAGE)
    cmd = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()",
           "build", "-W", "-n", "--keep-going", "--builder", builder, str(root)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return root / "_build" / builder


@pytest.fixture(scope="module")
def html(tmp_path_factory) -> Path:
    return _build_minimal_book(tmp_path_factory.mktemp("book"))


def test_math_is_served_locally_and_solutions_fold(html):
    static = html / "_static" / "mathjax"
    assert (static / "output" / "chtml" / "fonts" / "woff-v2" / "MathJax_Main-Regular.woff").is_file()
    assert (static / "input" / "tex" / "extensions").is_dir()  # loaded on demand (\require etc.)

    pages = sorted(html.rglob("*.html"))
    assert pages
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not REMOTE_MATHJAX.search(text), f"{page.name} points at a MathJax CDN"
        if page.parent.name == "book":  # the content pages: every one has math
            scripts = LOCAL_MATHJAX.findall(text)
            assert scripts, f"{page.name} does not load the local MathJax"
            assert all((page.parent / src).resolve().is_file() for src in scripts)

    page = (html / "book" / "page.html").read_text(encoding="utf-8")
    assert re.search(r'class="[^"]*solution[^"]*dropdown', page), "solution not folded"


def test_inline_scripts_are_written_once(html):
    """A script declared twice is a console error ("Identifier 'THEBE_JS_URL' has already been
    declared") that stops the rest of that script; Sphinx 7 wrote some twice (book/_ext)."""
    pages = sorted(html.rglob("*.html"))
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert text.count("const THEBE_JS_URL") <= 1, f"{page.name} declares THEBE_JS_URL twice"
        bodies = [body.strip() for body in INLINE_SCRIPT.findall(text) if body.strip()]
        repeated = sorted({body[:80] for body in bodies if bodies.count(body) > 1})
        assert not repeated, f"{page.name} repeats inline scripts: {repeated}"
    page = (html / "book" / "page.html").read_text(encoding="utf-8")
    assert page.count("const THEBE_JS_URL") == 1  # sphinx-thebe's configuration is still there


def test_print_stylesheet_is_linked(html):
    css = html / "_static" / "print.css"
    assert css.is_file()
    rules = css.read_text(encoding="utf-8")
    assert "@media print" in rules and "pre-wrap" in rules
    page = (html / "book" / "page.html").read_text(encoding="utf-8")
    assert re.search(r'<link[^>]*href="[^"]*_static/print\.css', page), "print.css not linked"
    # on screen: code cells wrap long lines instead of scrolling; display math has room for its bars
    assert re.search(r'<link[^>]*href="[^"]*_static/screen\.css', page), "screen.css not linked"
    screen = (html / "_static" / "screen.css").read_text(encoding="utf-8")
    wrap = re.search(r"div\.cell div\.cell_input pre \{([^}]*)\}", screen)
    assert wrap and "pre-wrap" in wrap.group(1)
    assert re.search(r'mjx-container\[jax="CHTML"\]\[display="true"\] \{[^}]*padding', screen)


def test_the_search_page_loads_the_snippet_script_deferred(html):
    """book/_ext/search_snippets.py: search snippets show formulas as text (the script runs after
    searchtools.js, which the search page loads after the extensions' scripts)."""
    search = (html / "search.html").read_text(encoding="utf-8")
    tag = re.search(r'<script[^>]*src="_static/search_snippets\.js[^"]*"[^>]*>', search)
    assert tag and "defer" in tag.group(0)
    assert (html / "_static" / "search_snippets.js").is_file()
    page = (html / "book" / "page.html").read_text(encoding="utf-8")
    assert "search_snippets.js" not in page       # content pages do not need it


def _chromium_dom(html: Path, page: str) -> subprocess.CompletedProcess:
    """The DOM of ``page`` (a path under the built book ``html``) after Chromium has run its
    scripts, the book served over http (search snippets and frames need it)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{page}"
        with tempfile.TemporaryDirectory() as profile:
            return subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                                   f"--user-data-dir={profile}", "--virtual-time-budget=20000",
                                   "--dump-dom", url], capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium")
def test_a_search_snippet_near_a_formula_has_no_tex(html):
    """The search page over http (snippets need it), in Chromium: a hit next to a formula."""
    run = _chromium_dom(html, "search.html?q=inline")
    snippets = re.findall(r'<p class="context">(.*?)</p>', run.stdout, re.DOTALL)
    assert snippets, run.stdout[-2000:] + run.stderr[-2000:]
    text = " ".join(re.sub(r"<[^>]+>", "", " ".join(snippets)).split())
    assert "inline x²" in text.lower() and "Σ" in text, text   # "Inline $x^2$ and display math: $$\\sum ..."
    assert not SNIPPET_TEX.search(text), text


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium")
def test_a_search_snippet_starts_at_the_text_not_the_page_header(html):
    """A hit in a page's title: the snippet starts at the title, not at the theme's article header
    (the download menu's ".md .pdf", the printed contents), which Sphinx's search takes as text."""
    run = _chromium_dom(html, "search.html?q=page")
    snippets = re.findall(r'<p class="context">(.*?)</p>', run.stdout, re.DOTALL)
    assert snippets, run.stdout[-2000:] + run.stderr[-2000:]
    for snippet in snippets:
        text = " ".join(re.sub(r"<[^>]+>", "", snippet).split())
        assert not re.search(r"\.(md|pdf|ipynb)\b", text) and "Contents" not in text, text
    starts = [" ".join(re.sub(r"<[^>]+>", "", s).split())[:80] for s in snippets]
    assert any(start.startswith("A page with math") for start in starts), starts


def test_one_page_book_renders_and_links_its_files(tmp_path):
    out = _build_minimal_book(tmp_path, builder="singlehtml")
    page = out / "index.html"  # the whole book, at the top of the output (book/_ext/singlehtml_book.py)
    text = page.read_text(encoding="utf-8")
    assert "A page with math" in text and "Another page" in text
    assert "def-probe" in text and "A definition, numbered" in text  # sphinx-proof renders here too
    assert text.count("const THEBE_JS_URL") == 1
    local = set(LOCAL_URL.findall(text))
    for needed in ("_static/print.css", "_static/mathjax/tex-mml-chtml.js"):
        assert needed in local, f"{needed} not linked from the one-page book"
    assert any(url.startswith("_images/") for url in local), "figure not linked"
    web_only = {"genindex.html", "search.html", "searchindex.js"}  # the theme's search and index
    missing = sorted(url for url in local - web_only if not (out / url).exists())
    assert not missing, f"the one-page book links files that are not there: {missing}"
    # links to labels stay on the page ("Solution to Exercise 1" -> the exercise)
    assert 'href="#ex-probe"' in text
    # the print cover: title, version, commit and date; folded blocks open for print
    import attnsvm

    cover = text[text.index('<div class="print-cover">'):text.index("</table>")]
    assert attnsvm.__version__ in cover and "commit" in cover and "built (UTC)" in cover
    assert "d.open = true" in text and text.count('class="print-cover"') == 1
    # the book's title and its parts (none here) for the PDF's bookmarks (tools/print_pdf.py)
    sys.path.insert(0, str(ROOT / "tools"))
    import print_pdf

    assert print_pdf.book_parts(page) == {"root": "A page with math", "parts": []}
    rules = (out / "_static" / "print.css").read_text(encoding="utf-8")
    assert "counter(page)" in rules and 'span[id^="document-"]' in rules


def test_status_page_and_scale_change_are_reexecuted(monkeypatch, tmp_path):
    """book/_ext/reexecute.py: which unchanged pages an incremental build re-reads, and the
    execution cache emptied when the fingerprint (library, requirements, scale) changes."""
    spec = importlib.util.spec_from_file_location("reexecute", ROOT / "book" / "_ext" / "reexecute.py")
    reexecute = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reexecute)
    cache = tmp_path / "cache"
    monkeypatch.setattr(reexecute.notebook_cache, "CACHE", cache)   # never the book's own cache
    notebook = {"kernelspec": {"name": "python3"}}
    env = SimpleNamespace(found_docs={"book/intro", "book/ch01", "book/status"},
                          metadata={"book/intro": {}, "book/ch01": notebook, "book/status": notebook})
    app = SimpleNamespace(config=SimpleNamespace(always_reread=["book/status", "book/not-in-toc"]))

    def outdated(changed=()):
        return reexecute._outdated(app, env, set(), set(changed), set())

    monkeypatch.delenv("ATTNSVM_SCALE", raising=False)
    assert outdated() == ["book/status"]                 # first build: everything is read anyway
    assert outdated() == ["book/status"]                 # the status page, on every build
    assert outdated(changed={"book/status"}) == []       # already re-read
    (cache / "marker").write_text("an executed notebook")
    monkeypatch.setenv("ATTNSVM_SCALE", "quick")
    assert outdated() == ["book/ch01", "book/status"]    # the scale changed: every notebook
    assert not (cache / "marker").exists()               # ... and the cache was emptied
    assert outdated() == ["book/status"]
    monkeypatch.setenv("ATTNSVM_SCALE", " Paper ")
    assert outdated() == ["book/ch01", "book/status"]
    monkeypatch.delenv("ATTNSVM_SCALE")
    assert outdated() == ["book/status"]                 # unset is paper
    (cache / "marker").write_text("an executed notebook")
    real = reexecute.notebook_cache.fingerprint
    monkeypatch.setattr(reexecute.notebook_cache, "fingerprint",
                        lambda: {**real(), "library": "changed"})
    assert outdated() == ["book/ch01", "book/status"]    # the library changed: every notebook
    assert not (cache / "marker").exists()


def test_a_text_paste_with_markup_fails_the_build():
    """book/_ext/glue_plain.py: TeX or Markdown emphasis in a {glue:text} value is caught (the
    reader would see it raw), plain prose and arithmetic are not."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import glue_plain

    for text in ("the selection $\\alpha$", "then *falls*, to 0.93", "rank \\alpha"):
        assert glue_plain.markup_in(text) is not None, text
    for text in ("0.9686", "2 * 3 = 6", "shape (*B, n)", "a*b*c", "what it is: observed (5 of 7)"):
        assert glue_plain.markup_in(text) is None, text


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium (make pdf's browser)")
def test_pdf_has_a_cover_a_contents_page_and_page_numbers(tmp_path):
    import pypdf

    out = _build_minimal_book(tmp_path, builder="singlehtml")
    pdf = tmp_path / "book.pdf"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "print_pdf.py"), "--paper", "a4",
                          str(out / "index.html"), str(pdf)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    reader = pypdf.PdfReader(str(pdf))
    pages = [page.extract_text() for page in reader.pages]
    assert "A course book with executable notebooks" in pages[0] and "/" not in pages[0].split("\n")[0]
    assert pages[1].startswith("2 / ") and "Contents" in pages[1]
    # the contents gives the page on which "Another page" starts, counted with the contents itself
    listed = int(re.search(r"Another page\s+(\d+)", pages[1]).group(1))
    assert pages[listed - 1].split("\n", 1)[1].startswith("Another page")
    assert all(text.startswith(f"{k} / {len(pages)}") for k, text in enumerate(pages, 1) if k > 1)
    assert abs(float(reader.pages[0].mediabox.height) - 841.9) < 1      # A4


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium")
def test_a_notation_table_fits_a_phone(html):
    """At 390 px a notation table is read row by row (screen.css): it ends inside the screen, and the
    page and the table do not scroll sideways, although its long formula makes two columns too wide.
    (Headless Chromium's window is at least 500 px wide: the page is shown in a 390 px frame, over
    http so that its script may write into the frame's holder.)"""
    (html / "phone.html").write_text('<html><body style="margin:0"><iframe src="book/other.html" '
                                     'width="390" height="900" style="border:0"></iframe></body></html>')
    run = _chromium_dom(html, "phone.html")
    right = re.search(r'data-table-right="(\d+)"', run.stdout)
    width = re.search(r'data-page-width="(\d+)"', run.stdout)
    hidden = re.search(r'data-table-hidden="(-?\d+)"', run.stdout)
    assert right and width and hidden, run.stdout[-2000:] + run.stderr[-2000:]
    measured = [int(m.group(1)) for m in (right, width, hidden)]
    # the table ends inside the screen, and neither the page nor the table's scroll box scrolls
    assert measured[0] <= 390 and measured[1] <= 390 and measured[2] <= 1, measured
