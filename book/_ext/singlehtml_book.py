"""Make the one-page HTML build (``--builder singlehtml``, used by ``make pdf``) work for this book.

Three Sphinx 7 quirks of a book whose root page is in a subfolder, fixed for ``singlehtml`` only:

- Sphinx looks up an extension's node writers by builder name (``singlehtml``) and falls back to
  the builder's format (``html``) only when no extension registered anything under that name.
  sphinx-exercise registers its nodes for ``singlehtml``, so the fallback is lost for everyone
  else: sphinx-proof's theorems and definitions stop the build ("unknown node type:
  definition_node"). Give ``singlehtml`` every ``html`` writer it lacks.
- The page is written to ``<root_doc>.html`` (``book/intro.html``) but its links to ``_static/``
  and ``_images/`` are relative to the output folder, so in a subfolder it loads no stylesheet,
  script or figure. Write it as ``index.html`` at the top of the output folder instead.
- A cross-reference to a label (``#document-book/ch01_model#ex-label``, e.g. sphinx-exercise's
  "Solution to Exercise 1") is rewritten to ``<root_doc>.html#ex-label``, a page that is not
  there; keep the anchor only, which is on this page.

And for paper: the page starts with a cover (title, version, commit, build date, licence), shown
only in print (book/_static/print.css), and a script opens every folded block (``<details>``:
hidden code cells, folded solutions) so that the PDF shows what it holds. The book's title and
the parts of the table of contents (each caption and the title of the part's first page) are
written into the page as JSON (``<script type="application/json" id="print-parts">``): the PDF's
bookmarks are headings only, and tools/print_pdf.py groups the chapters under their parts with it.
"""

import datetime
import html
import json
import sys
from pathlib import Path

from docutils import nodes

COVER = """<div class="print-cover">
<p class="print-cover-title">{title}</p>
<p class="print-cover-subtitle">A course book with executable notebooks, after Tarzanagh, Li,
Thrampoulidis and Oymak (2023) and Tarzanagh, Li, Zhang and Oymak (NeurIPS 2023)</p>
<p class="print-cover-author">{author}</p>
<table class="print-cover-build">
<tr><td>version</td><td>{version}</td></tr>
<tr><td>commit</td><td>{commit}</td></tr>
<tr><td>built (UTC)</td><td>{built}</td></tr>
</table>
<p class="print-cover-licence">Text and figures: CC BY 4.0. Code: MIT licence.</p>
</div>
<!-- print-contents -->
<script>document.addEventListener("DOMContentLoaded", function () {{
  document.querySelectorAll("details").forEach(function (d) {{ d.open = true; }});
}});</script>
"""


def toc_parts(app) -> dict:
    """The book's root title and the parts of ``_toc.yml``, each as its caption and the title of
    its first page: ``{"root": title, "parts": [{"caption", "first"}, ...]}`` (no parts: empty)."""
    site_map = getattr(app.env, "external_site_map", None)

    def title(docname):
        node = app.env.titles.get(docname)
        return node.astext() if node is not None else ""

    root = app.config.root_doc
    parts = []
    if site_map is not None and root in site_map:
        for tree in site_map[root].subtrees:
            first = next((str(item) for item in tree.items if isinstance(item, str)), None)
            if tree.caption and first:
                parts.append({"caption": tree.caption, "first": title(first)})
    return {"root": title(root), "parts": parts}


def _cover(app, pagename, templatename, context, doctree):
    """Prepend the print cover to the one-page book."""
    if app.builder.name != "singlehtml" or pagename != app.config.root_doc or "body" not in context:
        return
    sys.path.insert(0, str(Path(app.srcdir) / "tools"))
    import attnsvm
    import build_info

    built = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    title = app.config.html_title or app.config.project      # jupyter-book sets the book's title as html_title
    context["body"] = COVER.format(title=html.escape(title),
                                   author=html.escape(app.config.author),
                                   version=html.escape(attnsvm.__version__),
                                   commit=html.escape(build_info.commit()), built=built) + context["body"]
    parts = json.dumps(toc_parts(app)).replace("</", "<\\/")
    context["body"] += f'\n<script type="application/json" id="print-parts">{parts}</script>\n'


def _fix_singlehtml(app):
    builder = app.builder
    if builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for node_name, visit_depart in handlers.get("html", {}).items():
        single.setdefault(node_name, visit_depart)

    get_outfilename = builder.get_outfilename

    def outfilename(pagename):
        if pagename == app.config.root_doc:
            return str(Path(builder.outdir) / f"index{builder.out_suffix}")
        return get_outfilename(pagename)

    builder.get_outfilename = outfilename

    def fix_refuris(tree):
        for reference in tree.findall(nodes.reference):
            refuri = reference.get("refuri", "")
            first = refuri.find("#")
            second = refuri.find("#", first + 1) if first >= 0 else -1
            if second >= 0:
                reference["refuri"] = refuri[second:]

    builder.fix_refuris = fix_refuris


def setup(app):
    app.connect("builder-inited", _fix_singlehtml, priority=900)
    app.connect("html-page-context", _cover)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
