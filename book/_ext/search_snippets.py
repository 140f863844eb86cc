"""Readable search snippets: the search page loads book/_static/search_snippets.js.

Sphinx's search shows under each result a snippet cut from the text of the page's HTML, in which
every formula is still TeX source (MathJax typesets it in the browser), so snippets read
``\\(\\lVert W\\rVert \\to \\infty\\)``. The script replaces each formula by a plain-text rendering of
its TeX (``‖W‖ → ∞``) before the snippet is cut. It is added to the search page only, deferred, so
that it runs after the page's ``searchtools.js`` has defined ``Search`` and before the search starts
(at ``DOMContentLoaded``).
"""

SCRIPT = "search_snippets.js"


def _add_to_search_page(app, pagename, templatename, context, doctree):
    if pagename == "search" and app.builder.format == "html":
        app.builder.add_js_file(SCRIPT, defer="defer")     # this page only (reset after each page)


def setup(app):
    app.connect("html-page-context", _add_to_search_page)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
