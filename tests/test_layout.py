"""The library's layout: four subpackages in layers, none importing a layer above it, the tests laid
out the same way, and private modules kept private (nothing outside the library imports them, except
the tests of that subpackage)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "lib" / "attnsvm"

# what each subpackage may import (besides itself)
ALLOWED = {"model": set(), "maxmargin": {"model"}, "book": {"model"},
           "studies": {"model", "maxmargin", "book"}}


def _imported_subpackages(source: str, here: str) -> set[str]:
    """The attnsvm subpackages that a module of subpackage ``here`` imports (relative or absolute
    imports, at any depth of the code)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:
                found.add(here)
            elif node.level == 2:
                found.add(module.split(".")[0] if module else "")
            elif module.startswith("attnsvm."):
                found.add(module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[1] for alias in node.names
                      if alias.name.startswith("attnsvm.")}
    return found


def test_every_module_is_in_a_subpackage():
    assert sorted(p.name for p in LIB.glob("*.py")) == ["__init__.py"]
    assert sorted(p.name for p in LIB.iterdir() if p.is_dir() and p.name != "__pycache__") == \
        sorted(ALLOWED)


def test_no_module_imports_a_layer_above_its_own():
    for package, allowed in ALLOWED.items():
        for path in sorted((LIB / package).glob("*.py")):
            upward = _imported_subpackages(path.read_text(), package) - allowed - {package}
            assert not upward, f"{path.relative_to(ROOT)} imports {sorted(upward)}"


def test_the_layer_check_sees_an_upward_import():
    """The check above is not vacuous: upward imports of each form are found."""
    source = "def f():\n    from ..studies.a4 import a4_grid\nimport attnsvm.book.plot\nfrom .data import Problem\n"
    assert _imported_subpackages(source, "model") == {"studies", "book", "model"}


def test_tests_follow_the_layout():
    library_tests = {p.parent.name for p in (ROOT / "tests").glob("*/test_*.py")}
    assert set(ALLOWED) <= library_tests
    assert not [p.name for p in (ROOT / "tests").glob("test_lib_*.py")]


def test_private_modules_are_not_imported_from_outside():
    """Chapters, tools and benchmarks use the public API; only the library and the tests of the
    subpackage that holds a private module reach into it."""
    private = {f"{p.parent.name}.{p.stem}" for p in LIB.glob("*/_*.py") if p.stem != "__init__"}
    outside = [*ROOT.glob("book/*.md"), *ROOT.glob("tools/*.py"), *ROOT.glob("bench/*.py")]
    for path in outside:
        text = path.read_text()
        for module in private:
            package, name = module.split(".")
            assert f"attnsvm.{module}" not in text and f"from attnsvm.{package} import {name}" \
                not in text, f"{path.relative_to(ROOT)} uses the private module attnsvm.{module}"
