"""A chapter's MyST Markdown as plain Markdown, for notebooks opened outside the book.

The book's Markdown cells use MyST: glued numbers (``{glue:text}`key:.3f```), roles
(``{prf:ref}``, ``{ref}``, ``{doc}``, ``{cite:t}``, ...) and directive fences (theorem boxes,
exercises, notes). Jupyter, Colab, VS Code and GitHub show these raw. :func:`render` rewrites them as
plain Markdown: a glued value becomes the text the book shows (read from the build's execution cache,
formatted as MyST-NB formats it), a reference becomes the title of its target, a citation becomes
"Author et al. (year)", and a directive becomes a quoted block headed by its kind and title. The
student edition (``tools/student_edition.py``) uses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

GLUE = re.compile(r"\{glue(?::(?P<kind>text|md))?\}`(?P<body>[^`]+)`")
ROLE = re.compile(r"\{(?P<role>prf:ref|ref|doc|numref|eq|cite:t|cite:p|cite)\}`(?P<body>[^`]+)`")
OPENER = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}\s*(?P<title>.*)$")
OPTION = re.compile(r"^\s*:(?P<key>[\w-]+):\s*(?P<value>.*)$")
TARGET = re.compile(r"^\((?P<label>[\w.-]+)\)=\s*$")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*$")
COMMENT = re.compile(r"^%.*$")
KINDS = {"prf:theorem": "Theorem", "prf:proposition": "Proposition", "prf:lemma": "Lemma",
         "prf:definition": "Definition", "prf:remark": "Remark", "prf:conjecture": "Conjecture",
         "prf:corollary": "Corollary", "prf:example": "Example", "prf:assumption": "Assumption",
         "prf:proof": "Proof", "exercise": "Exercise", "note": "Note", "warning": "Warning",
         "important": "Important", "tip": "Tip", "admonition": ""}


class PlainMarkdownError(ValueError):
    """MyST that cannot be rendered: a glued key without a value, an unknown role or directive."""


@dataclass
class Targets:
    """What references point to: page titles, and labels with their titles, over the whole book."""

    pages: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    citations: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def of_book(cls, book: Path) -> "Targets":
        targets = cls()
        for page in sorted(book.glob("*.md")):
            targets.add_page(page.stem, page.read_text(encoding="utf-8"))
        bib = book / "references.bib"
        if bib.exists():
            targets.add_bibliography(bib)
        return targets

    def add_page(self, name: str, text: str) -> None:
        lines = text.split("\n")
        title = next((m["title"] for line in lines if (m := HEADING.match(line))
                      and line.startswith("# ")), name)
        self.pages[name] = _plain_title(title)
        for i, line in enumerate(lines):
            target = TARGET.match(line)
            if target and i + 1 < len(lines) and (heading := HEADING.match(lines[i + 1])):
                self.labels[target["label"]] = f'"{_plain_title(heading["title"])}"'
            opener = OPENER.match(line)
            if opener and opener["name"] in KINDS:
                for option in lines[i + 1:i + 6]:
                    match = OPTION.match(option)
                    if match is None:
                        break
                    if match["key"] == "label":
                        self.labels[match["value"].strip()] = box_title(opener["name"], opener["title"])

    def add_bibliography(self, path: Path) -> None:
        from pybtex.database import parse_file

        for key, entry in parse_file(str(path)).entries.items():
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            last = [" ".join(p.last_names).replace("{", "").replace("}", "") for p in people]
            names = last[0] if len(last) == 1 else (f"{last[0]} and {last[1]}" if len(last) == 2
                                                     else f"{last[0]} et al." if last else key)
            self.citations[key] = (names, entry.fields.get("year", "n.d."))


def _plain_title(title: str) -> str:
    return re.sub(r"\s+", " ", title).strip()


def box_title(name: str, title: str) -> str:
    kind = KINDS[name] or "Note"
    return f"{kind} ({title.strip()})" if title.strip() else kind


def render(markdown: str, values: Callable[[str, str], str], targets: Targets) -> str:
    """``markdown`` with its MyST rewritten as plain Markdown. ``values(page, key)`` returns the
    raw glued text/plain (or text/markdown) of ``key`` on ``page`` ("" = this page); it raises
    ``KeyError`` for a key without a value."""
    return "\n".join(_blocks(markdown.split("\n"), values, targets))


def directive_at(lines: list[str], i: int) -> tuple[re.Match, list[str], int] | None:
    """The MyST directive that opens at line ``i``, if one does: its opener (fence, name, title),
    its body without the ``:option:`` lines, and the index of its closing fence (``len(lines)`` if
    it is never closed)."""
    opener = OPENER.match(lines[i])
    if opener is None:
        return None
    fence = opener["fence"]
    end = next((j for j in range(i + 1, len(lines))
                if lines[j].strip() and set(lines[j].strip()) == {fence[0]}
                and len(lines[j].strip()) >= len(fence)), len(lines))
    body = lines[i + 1:end]
    while body and OPTION.match(body[0]):
        body = body[1:]
    return opener, body, end


def _blocks(lines: list[str], values, targets: Targets) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = directive_at(lines, i)
        if directive is None:
            if not (TARGET.match(line) or COMMENT.match(line)):
                out.append(_inline(line, values, targets))
            i += 1
            continue
        opener, body, end = directive
        name = opener["name"]
        if name not in KINDS:
            raise PlainMarkdownError(f"no plain rendering for the directive {{{name}}} "
                                     f"at {line.strip()!r}: add it to plain_markdown.KINDS")
        inner = _blocks(body, values, targets)
        while inner and not inner[0].strip():
            inner = inner[1:]
        if name == "prf:proof":
            out += [f"{opener['indent']}*Proof.* " + (inner[0] if inner else "")] + inner[1:]
        else:
            title = _inline(opener["title"], values, targets)
            out += [f"{opener['indent']}> **{box_title(name, title)}.**", f"{opener['indent']}>"]
            out += [f"{opener['indent']}> {text}".rstrip() for text in inner]
        i = end + 1
    return out


def _inline(text: str, values, targets: Targets) -> str:
    text = GLUE.sub(lambda m: _glue(m, values), text)
    return ROLE.sub(lambda m: _role(m["role"], m["body"], targets), text)


def _glue(match: re.Match, values) -> str:
    from myst_nb.core.variables import format_plain_text

    body = match["body"]
    page, key = body.split("::", 1) if "::" in body else ("", body)
    key, _, spec = key.partition(":")
    try:
        raw = values(page, key)
    except KeyError:
        raise PlainMarkdownError(f"no glued value for {body!r}: is the chapter in the execution cache "
                                 "(make book)?") from None
    if match["kind"] == "md":
        return raw
    return format_plain_text(raw, spec or "s")


def _role(role: str, body: str, targets: Targets) -> str:
    explicit = re.fullmatch(r"(?P<text>.*?)\s*<(?P<target>[^<>]+)>", body, re.DOTALL)
    text, target = (explicit["text"], explicit["target"]) if explicit else (None, body.strip())
    if role == "doc":
        name = Path(target).stem
        title = text or targets.pages.get(name, name)
        return f"[{title}]({name}.ipynb)" if name.startswith("ch") else f"*{title}*"
    if role in ("ref", "prf:ref", "numref"):
        return text or targets.labels.get(target, target)
    if role == "eq":
        return f"({target})"
    keys = [k.strip() for k in target.split(",")]
    found = [targets.citations.get(k, (k, "n.d.")) for k in keys]
    if role == "cite:t":
        return "; ".join(f"{names} ({year})" for names, year in found)
    return "(" + "; ".join(f"{names}, {year}" for names, year in found) + ")"
