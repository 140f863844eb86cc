# Root conftest: loads the plugin that lets nbval run the book's text notebooks (tests/nbval_md.py).
# It must live at the root so that its collection hook also applies to files under book/.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "tests"))
sys.path.insert(0, str(Path(__file__).parent / "tools"))     # notebook_cache, used by nbval_md
pytest_plugins = ["nbval_md"]
