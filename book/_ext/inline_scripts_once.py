"""Write each inline ``<script>`` once per page (Sphinx 7.4 writes some of them twice).

An extension that calls ``app.add_js_file(None, body=...)`` after the HTML builder exists
(sphinx-thebe at ``env-before-read-docs``: ``const THEBE_JS_URL = ...``; sphinx-togglebutton at
``builder-inited``: ``var togglebuttonSelector = ...``) registers the script twice: Sphinx passes
``None`` to the builder at once, and at ``prepare_writing`` adds the registry's copy again as
``''``. The two compare unequal, so every page got both, and the browser stopped at the second
``const``: "Identifier 'THEBE_JS_URL' has already been declared". Sphinx fixed this in 8.2.2
(sphinx-doc/sphinx#13402: pass ``''`` for ``None`` to the builder); jupyter-book 1.x requires
Sphinx 7, so this applies the same one-line fix to the builder, before any extension adds a script.
"""


def _none_as_empty(app):
    builder = app.builder
    add_js_file = getattr(builder, "add_js_file", None)
    if add_js_file is None or getattr(add_js_file, "_none_as_empty", False):
        return

    def add_js_file_once(filename, **kwargs):
        add_js_file(filename or "", **kwargs)

    add_js_file_once._none_as_empty = True
    builder.add_js_file = add_js_file_once


def setup(app):
    # Before sphinx-togglebutton's builder-inited handler (default priority 500).
    app.connect("builder-inited", _none_as_empty, priority=100)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
