"""A glued value pasted as plain text (``{glue:text}``) must be plain text.

``{glue:text}`` pastes a value verbatim: TeX (``$\\alpha$``) or Markdown emphasis (``*falls*``) in
it would reach the reader raw. Such values are glued as Markdown (``glue(key, Markdown(...))``)
and pasted with ``{glue:md}`key:myst```, which renders them. This extension makes the build warn
(and so, with ``-W``, fail) on any text paste that holds ``$``, a backslash command or ``*word*``.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
MARKUP = re.compile(r"\$|\\[A-Za-z]+|(?<![\w*])\*[^\s*][^*]*\*(?![\w*])")


def markup_in(text: str) -> str | None:
    """The first TeX or Markdown markup in ``text`` (None if it is plain)."""
    match = MARKUP.search(text)
    return None if match is None else match.group(0)


def _check(app, doctree, docname):
    for node in doctree.findall(nodes.inline):
        if "pasted-text" not in node.get("classes", []):
            continue
        found = markup_in(node.astext())
        if found is not None:
            LOGGER.warning(f"a {{glue:text}} paste holds markup {found!r} that the reader would see raw: "
                           f"glue it as Markdown (glue(key, Markdown(text))) and paste it with "
                           f"{{glue:md}}`key:myst`: {node.astext()[:80]!r}", location=node)


def setup(app):
    app.connect("doctree-resolved", _check)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
