"""Regenerate the README's and docs' examples of command output from the real commands (--check: say
which are stale and exit 1, changing nothing).

An example is a code block (fenced, or indented 4 spaces) whose first line is `$ fuseview ARGS`: the rest
of the block is what that command prints, run here from the repository root (an output file goes to a
temporary folder and is shown by its name). EXAMPLES says which lines of the output a doc keeps. The
README's rule count ("N rules") is the catalogue's. tests/test_docs.py runs the check.

    python scripts/doc_examples.py [--check]

Requires: fuseview, onnxruntime
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# error figures of a validation depend on the CPU's kernels: compared masked, written as measured here
VARIES = re.compile(r"\d\.\d+e-\d\d|\d\.\d+e\+\d\d|0\.\d{4,}")


def _fuse_lines(lines: list[str]) -> list[str]:
    keep = ("applied", "    ", "nodes", "  validated")
    return [ln for ln in lines if ln.startswith(keep)]


def _provenance_section(lines: list[str]) -> list[str]:
    start = next(i for i, ln in enumerate(lines) if ln.startswith("compiled kernels by Inductor's"))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return ["...", *lines[start:end]]


def _all(lines: list[str]) -> list[str]:
    return lines


# (doc, the command as the doc shows it, which output lines it keeps)
EXAMPLES: list[tuple[str, str, Callable[[list[str]], list[str]]]] = [
    ("README.md", "fuse tests/data/gpt2/gpt2_12l_ts17.onnx -o gpt2_12l_fused.onnx", _fuse_lines),
    ("docs/traces.md", "trace tests/data/traces/cos_relu_eager.json tests/data/traces/cos_relu_compiled.json"
     " --top 6", _all),
    ("docs/traces.md", "trace tests/data/traces/provenance/mlp_block", _provenance_section),
]
OUTPUT_FLAGS = ("-o", "--output", "--json")


def run_command(command: str) -> list[str]:
    """What `fuseview COMMAND` prints (stdout), its output files in a temporary folder."""
    from fuseview.cli import main

    args = command.split()
    with tempfile.TemporaryDirectory(prefix="fuseview-doc-") as tmp:
        real = [os.path.join(tmp, a) if i and args[i - 1] in OUTPUT_FLAGS else a for i, a in enumerate(args)]
        out = io.StringIO()
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                code = main(real)
        finally:
            os.chdir(cwd)
        if code != 0:
            raise SystemExit(f"doc_examples: `fuseview {command}` exited {code}")
        return out.getvalue().replace(tmp + os.sep, "").rstrip("\n").splitlines()


def _block(text: str, command: str) -> tuple[int, int, str]:
    """(start, end) offsets of the example's output lines in text, and their indent: a fenced block's
    lines up to its closing fence; an indented block's up to its last indented line."""
    head = f"$ fuseview {command}"
    at = text.find(head)
    if at < 0:
        raise SystemExit(f"doc_examples: no block starts with `{head}`")
    indent = text[text.rfind("\n", 0, at) + 1:at]
    start = end = text.index("\n", at) + 1
    pos = start
    while pos < len(text):
        nl = text.find("\n", pos)
        stop = len(text) if nl < 0 else nl + 1
        line = text[pos:stop].rstrip("\n")
        if not indent:
            if line.startswith("```"):
                return start, pos, indent
        elif line.strip() and not line.startswith(indent):
            break
        elif line.strip():
            end = stop
        pos = stop
    return start, end if indent else pos, indent


def regenerate(text: str, command: str, keep: Callable[[list[str]], list[str]]) -> tuple[str, str, str]:
    """(new text, old block, new block) with the example of command written from its real output."""
    start, end, indent = _block(text, command)
    lines = keep(run_command(command))
    new = "".join(f"{indent}{ln}".rstrip() + "\n" for ln in lines)
    return text[:start] + new + text[end:], text[start:end], new


def rule_count_text(text: str) -> str:
    """The README with its rule count set to the catalogue's."""
    from fuseview.fusion.rules import catalogue

    return re.sub(r"\*\*Finds fusion candidates\*\*: \d+ rules",
                  f"**Finds fusion candidates**: {len(catalogue())} rules", text, count=1)


def stale(check_only: bool) -> list[str]:
    """The examples whose block differs from the command's output (rewritten unless check_only)."""
    found = []
    docs: dict[str, str] = {}
    for doc, command, keep in EXAMPLES:
        text = docs.setdefault(doc, (ROOT / doc).read_text(encoding="utf-8"))
        new_text, old, new = regenerate(text, command, keep)
        if VARIES.sub("#", old) != VARIES.sub("#", new):
            found.append(f"{doc}: `fuseview {command}`")
        docs[doc] = new_text
    readme = docs.setdefault("README.md", (ROOT / "README.md").read_text(encoding="utf-8"))
    counted = rule_count_text(readme)
    if counted != readme:
        found.append("README.md: the rule count")
        docs["README.md"] = counted
    if not check_only:
        for doc, text in docs.items():
            if (ROOT / doc).read_text(encoding="utf-8") != text:
                (ROOT / doc).write_text(text, encoding="utf-8")
    return found


def main() -> int:
    """Rewrite the examples (or, with --check, list the stale ones and exit 1)."""
    check = "--check" in sys.argv[1:]
    found = stale(check)
    for f in found:
        print(("stale: " if check else "rewrote: ") + f)
    return 1 if check and found else 0


if __name__ == "__main__":
    sys.exit(main())
