"""The version `placement-lite --version` prints: the installed package's,
or, in a source tree that was never installed, the one setup.py declares
(so there is one place to change it)."""
from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

DISTRIBUTION = "placement-lite"


def version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pass
    setup_py = Path(__file__).resolve().parent.parent / "setup.py"
    try:
        found = re.search(r"""\bversion\s*=\s*["']([^"']+)["']""",
                          setup_py.read_text(encoding="utf-8"))
    except OSError:
        found = None
    return found.group(1) if found else "unknown"
