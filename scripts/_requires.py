"""The scripts' one-line requirement check: importing this module checks the running script's needs.

Each script in scripts/ says what it needs in one docstring line, `Requires: torch, onnxruntime, bin:gcc`
(Python modules, and programs on PATH as `bin:NAME`), and imports this module before anything it names:

    import _requires  # noqa: F401 - checks the "Requires:" line above

When something is missing it prints one line naming all of it and how to get it, and exits 2. A script
with further needs per case calls require() for them where the case starts.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# how to get a need, where `pip install NAME` is not it
_INSTALL = {"torch": "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu",
            "gcc": "apt-get install gcc (Inductor compiles C++ on the CPU)",
            "fuseview": "pip install -e . (or run with PYTHONPATH=. from the repository root)",
            "PySide6": "pip install -e . (fuseview's GUI dependencies)",
            "pyqtgraph": "pip install -e . (fuseview's GUI dependencies)"}


def missing(*needs: str) -> list[str]:
    """The needs not met: Python modules not importable, programs (`bin:gcc`) not on PATH."""
    out = []
    for n in needs:
        if n.startswith("bin:"):
            if shutil.which(n[4:]) is None:
                out.append(n[4:])
        else:
            try:
                found = importlib.util.find_spec(n) is not None
            except (ImportError, ValueError):  # a module set to None in sys.modules: blocked
                found = False
            if not found:
                out.append(n)
    return out


def require(*needs: str, what: str | None = None) -> None:
    """Exit 2 with one line naming every missing need and how to get it; return when all are there."""
    lack = missing(*needs)
    if lack:
        how = "; ".join(_INSTALL.get(n, f"pip install {n}") for n in lack)
        print(f"{what or Path(sys.argv[0]).name}: needs {', '.join(lack)} ({how})", file=sys.stderr)
        sys.exit(2)


def declared(doc: str | None) -> list[str]:
    """The needs a docstring's `Requires:` line names."""
    for line in (doc or "").splitlines():
        if line.strip().startswith("Requires:"):
            return [n.strip() for n in line.split(":", 1)[1].split(",") if n.strip()]
    return []


def _check_main() -> None:
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or Path(path).resolve().parent != HERE:
        return  # imported by something other than a script of this folder (a test): nothing to check
    needs = declared(main.__doc__)
    if "fuseview" in needs and importlib.util.find_spec("fuseview") is None \
            and (HERE.parent / "fuseview" / "__init__.py").is_file():
        sys.path.insert(0, str(HERE.parent))  # this checkout's fuseview, as the scripts run from it
    require(*needs, what=Path(path).name)


_check_main()
