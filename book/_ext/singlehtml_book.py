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
"""

from pathlib import Path

from docutils import nodes


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
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
