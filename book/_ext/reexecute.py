"""Re-execute what an incremental build would otherwise leave stale.

Sphinx re-reads (and MyST-NB, with ``execute_notebooks: force``, re-executes) only the pages whose
source changed since the last build in ``_build/``. Two things change without a source changing:

- the build itself: pages listed in the ``always_reread`` setting (the status page, which records
  the build's date and scale) are re-read on every build;
- the scale: when ``ATTNSVM_SCALE`` differs from the one of the last build (``paper`` when unset,
  as ``attnsvm.scale()`` reads it), every notebook page is re-read, so that a book built after
  ``ATTNSVM_SCALE=quick make book`` does not keep quick-scale pages.
"""

import os

ENV_VARIABLE = "ATTNSVM_SCALE"


def _scale() -> str:
    return os.environ.get(ENV_VARIABLE, "").strip().lower() or "paper"


def _outdated(app, env, added, changed, removed):
    scale, previous = _scale(), getattr(env, "attnsvm_scale", None)
    env.attnsvm_scale = scale
    reread = {doc for doc in app.config.always_reread if doc in env.found_docs}
    if previous is not None and previous != scale:
        reread |= {doc for doc in env.found_docs if "kernelspec" in env.metadata.get(doc, {})}
    return sorted(reread - set(added) - set(changed))


def setup(app):
    app.add_config_value("always_reread", [], "env")
    app.connect("env-get-outdated", _outdated)
    return {"version": "1.0", "env_version": 1, "parallel_read_safe": True,
            "parallel_write_safe": True}
