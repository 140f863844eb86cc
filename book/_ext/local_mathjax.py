"""Serve MathJax 3 from the book's own ``_static/`` so that math renders offline.

Sphinx loads MathJax from a CDN by default; a reader without network then sees raw TeX. The PyPI
wheel ``django-static-mathjax`` (import name ``mathjax``; Django is not needed) ships the MathJax 3
``es5`` tree. This extension points ``mathjax_path`` at a local copy and, once the HTML is written,
copies the combined TeX/MathML->CHTML script plus the components it loads on demand (fonts,
TeX extensions, menu, accessibility) into ``<outdir>/_static/mathjax/``.
"""

import shutil
from pathlib import Path

import mathjax

SCRIPT = "tex-mml-chtml.js"
SOURCE = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
# The components the combined script loads lazily, by path relative to itself.
SUBDIRS = ("a11y", "adaptors", "input", "output", "sre", "ui")


def _use_local_script(app, config):
    config.mathjax_path = f"mathjax/{SCRIPT}"  # relative paths are resolved against _static/


def _copy_mathjax(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / "mathjax"
    script = dest / SCRIPT
    if script.exists() and script.stat().st_size == (SOURCE / SCRIPT).stat().st_size:
        return  # already copied by an earlier build
    dest.mkdir(parents=True, exist_ok=True)
    for sub in SUBDIRS:
        shutil.copytree(SOURCE / sub, dest / sub, dirs_exist_ok=True)
    shutil.copy2(SOURCE / SCRIPT, script)  # last, so an interrupted copy is redone next time


def setup(app):
    app.connect("config-inited", _use_local_script)
    app.connect("build-finished", _copy_mathjax)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
