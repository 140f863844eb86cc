# Root conftest: loads the plugin that lets nbval run the book's text notebooks (tests/site/nbval_md.py).
# It must live at the root so that its collection hook also applies to files under book/.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "tests" / "site"))    # nbval_md
sys.path.insert(0, str(Path(__file__).parent / "tests" / "fuzz"))    # fuzz_inputs and its case modules
sys.path.insert(0, str(Path(__file__).parent / "tools"))     # notebook_cache, used by nbval_md
pytest_plugins = ["nbval_md"]
