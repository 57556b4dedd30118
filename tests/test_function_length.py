"""House style: no function over 80 lines (decorators included) in fuseview/, scripts/ or bench/, no module
over 600 lines in fuseview/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

LIMIT = 80
FOLDERS = ("fuseview", "scripts", "bench")


def long_functions(source: str, limit: int = LIMIT) -> list[tuple[str, int, int]]:
    """(name, first line, length) of every function or method in `source` longer than `limit` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > limit:
                found.append((node.name, first, length))
    return found


def test_the_count_takes_decorators_and_nested_functions():
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT - 2))
    at_limit = f"def f():\n{body}\n    return 0\n"  # exactly LIMIT lines
    assert long_functions(at_limit) == []
    assert long_functions("@staticmethod\n" + at_limit) == [("f", 1, LIMIT + 1)]
    inner = "\n".join("        " + ln for ln in at_limit.splitlines())
    nested = f"class C:\n    def g(self):\n{inner}\n"
    assert long_functions(nested) == [("g", 2, LIMIT + 1)]  # g is over, f inside it is not


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_function_over_80_lines(folder):
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files, f"no Python files under {folder}/"
    over = [f"{Path(p).relative_to(ROOT)}:{line} {name} ({n} lines)"
            for p in files for name, line, n in long_functions(p.read_text(encoding="utf-8"))]
    assert not over, "functions over 80 lines:\n" + "\n".join(over)


MODULE_LIMIT = 600


def test_no_module_over_600_lines():
    """House style: a module is at most 600 lines (split it by what its parts do)."""
    over = [f"{p.relative_to(ROOT)} ({n} lines)" for p in sorted((ROOT / "fuseview").rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MODULE_LIMIT]
    assert not over, "modules over 600 lines:\n" + "\n".join(over)
