"""The API reference (book/api.md) links the library to the book.

- Docstrings cite book pages in words ("book chapter 4", "chapters 2-4", "book page 'What is proved
  where'", "the numerics appendix", "the reproduction report"); each citation becomes a link to
  that page.
- A docstring refers to a name as the library's users write it (``attnsvm.train``, or ``train``
  inside its own module), while the reference documents it where it lives (``attnsvm.model.train``):
  such a reference is resolved to the documented entry. A name that exists in the library but has
  no entry (a private module, a module constant) is shown as code; a name that does not exist is
  left unresolved, so the strict build fails on it.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from docutils import nodes

CHAPTER = re.compile(r"(?P<book>book )?(?P<word>[Cc]hapters?) (?P<first>\d+b?)(?:(?P<dash>-)(?P<last>\d+b?))?")
PAGES = {
    re.compile(r"book page '(What is proved where)'"): "claims",
    re.compile(r"the (numerics appendix)"): "numerics",
    re.compile(r"the (reproduction report)"): "report",
}


def _chapters(srcdir: Path) -> dict[str, str]:
    """Chapter number ('4', '3b') -> docname ('book/ch04_gd_convergence')."""
    found = {}
    for path in sorted((srcdir / "book").glob("ch[0-9][0-9]*.md")):
        number = re.match(r"ch(\d+b?)_", path.name).group(1).lstrip("0")
        found[number] = f"book/{path.stem}"
    return found


def _outside_literals(line: str, start: int) -> bool:
    """Whether position ``start`` of a docstring line lies outside ``literal`` spans."""
    return line[:start].count("``") % 2 == 0 and line[:start].count("`") % 2 == 0


def _link_citations(app, what, name, obj, options, lines):
    chapters = app.env.attnsvm_chapters
    for index, line in enumerate(lines):
        def chapter(match, line=line):
            if not _outside_literals(line, match.start()):
                return match.group(0)
            first, last = match.group("first"), match.group("last")
            if first not in chapters or (last and last not in chapters):
                return match.group(0)
            text = f"{match.group('book') or ''}{match.group('word')} :doc:`{first} </{chapters[first]}>`"
            return text + (f"-:doc:`{last} </{chapters[last]}>`" if last else "")

        line = CHAPTER.sub(chapter, line)
        for pattern, page in PAGES.items():
            line = pattern.sub(lambda m, p=page, l=line: m.group(0) if not _outside_literals(l, m.start())
                               else m.group(0).replace(m.group(1), f":doc:`{m.group(1)} </book/{p}>`"), line)
        lines[index] = line


def _exists(target: str) -> bool:
    """Whether ``target`` names something in the library: a module, or a name defined in one of
    its modules (its attributes are then taken on trust: dataclass fields exist on instances)."""
    import sys

    importlib.import_module("attnsvm")   # autodoc imports it only when the API page is read again
    if target.startswith("attnsvm."):
        try:
            importlib.import_module(target)
            return True
        except ImportError:
            pass
    head = target.split(".")[-2] if target.startswith("attnsvm.") and target.count(".") > 1 \
        else target.split(".")[0]
    modules = [module for name, module in list(sys.modules.items()) if name.startswith("attnsvm")]
    return any(hasattr(module, head) for module in modules)


def _resolve(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    if not re.fullmatch(r"[A-Za-z_][\w.]*", target):       # napoleon read a phrase as a type
        return contnode
    domain = env.get_domain("py")
    short = target.split(".")[-1]
    parent = target.split(".")[-2] if target.count(".") else None
    candidates = [full for full in domain.objects
                  if full.startswith("attnsvm.") and full.split(".")[-1] == short
                  and not any(part.startswith("_") for part in full.split("."))
                  and (parent is None or parent.startswith("attnsvm") or full.split(".")[-2] == parent)]
    if len(candidates) == 1:
        return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], candidates[0],
                                   node, contnode) or domain.resolve_xref(
            env, node["refdoc"], app.builder, "obj", candidates[0], node, contnode)
    if _exists(target):
        return nodes.literal(target, contnode.astext())
    return None


def _chapter_map(app):
    app.env.attnsvm_chapters = _chapters(Path(app.srcdir))


def setup(app):
    app.connect("builder-inited", _chapter_map)
    app.connect("autodoc-process-docstring", _link_citations)
    app.connect("missing-reference", _resolve)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
