"""The scripts' one-line requirement check: what is missing, named in one line on stderr, exit 2."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

# module -> what to install, where the pip name differs or a hint helps
_INSTALL = {"torch": "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu",
            "gcc": "apt-get install gcc (Inductor compiles C++ on the CPU)"}


def missing(*needs: str) -> list[str]:
    """The needs not met: Python modules not importable, programs (`bin:gcc`) not on PATH."""
    out = []
    for n in needs:
        if n.startswith("bin:"):
            if shutil.which(n[4:]) is None:
                out.append(n[4:])
        elif importlib.util.find_spec(n) is None:
            out.append(n)
    return out


def require(*needs: str, what: str | None = None) -> None:
    """Exit 2 with one line naming every missing need and how to get it; return when all are there."""
    lack = missing(*needs)
    if lack:
        how = "; ".join(_INSTALL.get(n, f"pip install {n}") for n in lack)
        print(f"{what or Path(sys.argv[0]).name}: needs {', '.join(lack)} ({how})", file=sys.stderr)
        sys.exit(2)
