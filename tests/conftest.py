import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# validate/ is a folder of the checkout, not an installed package (DESIGN.md): make it importable here.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("MPLBACKEND", "Agg")
# compiled plans go to a cache folder of this run (roofline.codegen), never the user's ~/.cache
if "ROOFLINE_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["ROOFLINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="roofline-test-cache-")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
