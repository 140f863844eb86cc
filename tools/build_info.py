"""What a build of the book was made from: the library's version and the git commit (shown on the
Build status page and on the PDF's cover)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commit(root: Path = ROOT) -> str:
    """The short git hash of the checkout (+ " with local changes" if tracked files differ from
    it), or why it is unknown."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=30, check=True,
                              cwd=root).stdout.strip()
    try:
        head = git("rev-parse", "--short=12", "HEAD")
        return head + (" with local changes" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown (not built from a git checkout)"
