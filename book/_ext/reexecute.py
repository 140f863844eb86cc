"""Re-read (and so re-render) what an incremental build would otherwise leave stale.

Sphinx re-reads only the pages whose source changed since the last build in ``_build/``. Two
things change without a page's source changing:

- the build itself: pages listed in the ``always_reread`` setting (the status page, which records
  the build's date and scale) are re-read on every build;
- the execution's inputs: the library's source, the pinned requirements or the scale
  ``ATTNSVM_SCALE`` (together the *fingerprint* of ``tools/notebook_cache.py``). When the
  fingerprint differs from the last build's, every notebook page is re-read, and the execution
  cache, filled under the old fingerprint, is emptied (so MyST-NB executes the chapters anew unless
  ``tools/execute_chapters.py`` or ``make test`` already did, under the new one). A book built
  after ``ATTNSVM_SCALE=quick make book``, or after a library change, keeps no stale page.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import notebook_cache  # noqa: E402


def _outdated(app, env, added, changed, removed):
    current, previous = notebook_cache.fingerprint(), getattr(env, "attnsvm_fingerprint", None)
    env.attnsvm_fingerprint = current
    notebook_cache.clear_if_stale()
    reread = {doc for doc in app.config.always_reread if doc in env.found_docs}
    if previous is not None and previous != current:
        reread |= {doc for doc in env.found_docs if "kernelspec" in env.metadata.get(doc, {})}
    return sorted(reread - set(added) - set(changed))


def setup(app):
    app.add_config_value("always_reread", [], "env")
    app.connect("env-get-outdated", _outdated)
    return {"version": "1.1", "env_version": 2, "parallel_read_safe": True,
            "parallel_write_safe": True}
