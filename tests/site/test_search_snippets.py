"""Search snippets show formulas as text, not TeX (book/_static/search_snippets.js).

Sphinx's search cuts each result's snippet from the page's HTML, where a formula is still its TeX
source; the script replaces each formula element by a plain rendering first. Here: its TeX-to-text
function, under node (skipped without node). The extension that loads it and the search page of a
built book in Chromium are tested in test_book_html.py (which builds a small book once).
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "book" / "_static" / "search_snippets.js"

CASES = {
    r"\(\lVert W\rVert \to \infty\)": "‖W‖ → ∞",
    r"\(\gamma_{it}\)": "γᵢₜ",
    r"\(\operatorname{rank} W^{mm} \le \min(n, d)\)": "rank W^mm ≤ min(n, d)",
    r"\(X \in \mathbb{R}^{T \times d}\)": "X ∈ ℝ^(T × d)",
    r"\[\frac{W}{\|W\|_F} \to \frac{W^{mm}}{\|W^{mm}\|_F}\]": "W/(‖W‖_F) → (W^mm)/(‖W^mm‖_F)",
    r"\(\mathbb{S}(X W z)_t\)": "𝕊(X W z)ₜ",
    r"\(\bar{x}^\top \hat\gamma\)": "x̄ᵀ γ̂",
    r"\(\tfrac12 \log C\)": "1/2 log C",
    r"\(\sqrt{d}\, e^{-t}\)": "√d e^(-t)",
    r"\begin{aligned} a &= b \\ c &= \left(\frac{1}{2}\right) \end{aligned}": "a = b ; c = (1/2)",
    r"\(\{i : \alpha_i > 0\}\)": "{i : αᵢ > 0}",
}


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the script")
def test_tex_becomes_plain_text():
    program = (f"const {{texToText}} = require({json.dumps(str(SCRIPT))});"
               f"const cases = {json.dumps(list(CASES))};"
               "console.log(JSON.stringify(cases.map(texToText)));")
    run = subprocess.run(["node", "-e", program], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    got = dict(zip(CASES, json.loads(run.stdout)))
    assert got == CASES
    assert not any("\\" in text or "$" in text for text in got.values())
