"""Put the executed ``.ipynb`` of every chapter in its page's download menu.

sphinx-book-theme lists a ``.ipynb`` download for text notebooks only when a launch service
(Binder, Colab, ...) is configured; this offline book configures none. Before the theme builds its
header buttons (priority 501), copy the notebook MyST-NB executed for the page (with its outputs)
next to the page's source in ``_sources/`` and tell the theme about it.
"""

import shutil
from pathlib import Path


def _offer_ipynb(app, pagename, templatename, context, doctree):
    if "kernelspec" not in app.env.metadata.get(pagename, {}):
        return
    executed = Path(app.env.mystnb_config.output_folder) / f"{pagename}.ipynb"
    if not executed.exists():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    app.setup_extension("myst_nb")
    app.connect("html-page-context", _offer_ipynb, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
