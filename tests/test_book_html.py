"""The book's Sphinx setup renders math offline and folds solutions.

Builds a two-page book with the repository's own ``_config.yml`` and ``book/_ext`` (execution off,
same strict flags as ``make book``) in a temporary folder, then reads the HTML: MathJax must come
from the book's ``_static/`` and no page may point at a CDN.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
LOCAL_MATHJAX = re.compile(r'<script[^>]*src="([^"]*_static/mathjax/tex[^"]*\.js)"')
REMOTE_MATHJAX = re.compile(r"cdn\.jsdelivr|https?://[^\"' ]*mathjax", re.IGNORECASE)

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
"""


def _build_minimal_book(root: Path) -> Path:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    (root / "_config.yml").write_text(yaml.safe_dump(config))
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: book/page\nchapters:\n  - file: book/other\n"
    )
    shutil.copytree(ROOT / "book" / "_ext", root / "book" / "_ext")
    shutil.copy(ROOT / "book" / "references.bib", root / "book" / "references.bib")
    (root / "book" / "page.md").write_text(PAGE)
    (root / "book" / "other.md").write_text("# Another page\n\nWith $\\alpha$ and no code.\n")
    cmd = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()",
           "build", "-W", "-n", "--keep-going", str(root)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return root / "_build" / "html"


def test_math_is_served_locally_and_solutions_fold(tmp_path):
    html = _build_minimal_book(tmp_path)
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
