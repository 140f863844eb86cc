"""Put the executed ``.ipynb`` of every chapter, with its outputs, in its page's download menu.

sphinx-book-theme lists a ``.ipynb`` download for text notebooks only when a launch service
(Binder, Colab, ...) is configured; this offline book configures none. Before the theme builds its
header buttons (priority 501), write the chapter as executed for this build next to the page's
source in ``_sources/`` and tell the theme about it. The executed notebook is the one in the book's
execution cache (``tools/notebook_cache.py``), outputs included: the notebook MyST-NB writes to its
output folder for a cached chapter holds no outputs (it is written before the cached outputs are
merged). A page MyST-NB executes itself on every build (no cache entry) is copied from there.
"""

import shutil
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import notebook_cache  # noqa: E402


def _cached(source: Path):
    """The executed notebook of chapter ``source`` from the execution cache (None if absent)."""
    with notebook_cache.locked_cache(clear_stale=False) as cache:
        record = None if cache is None else notebook_cache.cached_record(
            cache, notebook_cache.read_chapter(source))
        return None if record is None else cache.get_cache_bundle(record.pk).nb


def _offer_ipynb(app, pagename, templatename, context, doctree):
    if "kernelspec" not in app.env.metadata.get(pagename, {}):
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    executed = _cached(Path(app.srcdir) / f"{pagename}.md")
    if executed is not None:
        nbformat.write(executed, target)
    else:
        written = Path(app.env.mystnb_config.output_folder) / f"{pagename}.ipynb"
        if not written.exists():
            return
        shutil.copy2(written, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    app.setup_extension("myst_nb")
    app.connect("html-page-context", _offer_ipynb, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
