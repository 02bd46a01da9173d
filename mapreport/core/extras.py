"""How to install an optional extra (Spark, XPlane): mapreport is installed from its clone,
not from a package index, so the command names the clone and the Python it runs from."""

from __future__ import annotations

import sys
from pathlib import Path


def install_hint(extra: str) -> str:
    """The command that adds `extra` to the environment running mapreport: from the clone it
    runs from (an editable install), else from a clone."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file():
        return f"{sys.executable} -m pip install -e '{root}[{extra}]'"
    return f"pip install -e '.[{extra}]' in a clone of mapreport"
