"""The README and docs/ name only commands and repository paths that exist, and the README stays short."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fuseview.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# a backticked path into the repository: `bench/x.py`, `fuseview/graph/`, `tests/data/gpt2/a.onnx` ...
_PATH = re.compile(r"`((?:bench|fuseview|scripts|tests|assets|docs)/[^`\s*?<>|\[\]{}]*)`")
# a relative Markdown link: [text](docs/x.md) or [text](x.md#anchor)
RELATIVE_PATH = re.compile(r"(?<![\w./])((?:\.\./)+[\w.-]+(?:/[\w.-]+)*)")  # ../x, ../../x/y, not .../x
_LINK = re.compile(r"\]\(([^)\s#:]+)(?:#[^)]*)?\)")
# as typed: at the start of a command, after a prompt, `&&`, `python -m` or `xvfb-run`
_COMMAND = re.compile(r"(?:^|\$ |&& |; |python -m |xvfb-run )fuseview ([a-z][a-z_-]*)(?![\w./-])")


def _commands() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(sub.choices)


def _texts() -> list[tuple[Path, str]]:
    return [(p, p.read_text(encoding="utf-8")) for p in DOCS]


def test_readme_is_short() -> None:
    """The README is what a newcomer reads first: 250 lines at most; the rest is in docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"README.md has {lines} lines"


def _code(text: str) -> list[str]:
    """The lines of code in a Markdown text: fenced blocks, indented blocks and inline `spans`."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            out.append(line.strip())
        else:
            out.extend(re.findall(r"`([^`]+)`", line))
    return out


def test_every_named_command_exists() -> None:
    """Each `fuseview WORD` a doc shows as code (WORD not a file name) is a real subcommand."""
    commands = _commands()
    assert {"open", "scan", "fuse", "profile", "tune", "trace"} <= commands
    bad = []
    for path, text in _texts():
        for line in _code(text):
            for word in _COMMAND.findall(line):
                if word not in commands:
                    bad.append(f"{path.name}: fuseview {word}  ({line[:80]})")
    assert not bad, "\n".join(bad)


def test_every_named_path_exists() -> None:
    """Each backticked repository path and each relative link in README.md and docs/*.md exists."""
    bad = []
    for path, text in _texts():
        for name in _PATH.findall(text):
            name = name.split("::")[0].rstrip(".,:;")  # a test id names its file
            if not (ROOT / name).exists():
                bad.append(f"{path.name}: `{name}`")
        for target in _LINK.findall(text):
            if target.startswith(("http", "mailto")):
                continue
            resolved = (path.parent / target).resolve()
            if not resolved.exists():
                bad.append(f"{path.name}: link {target}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("page", ["rules", "robustness", "profiling-and-tune", "traces", "performance",
                                  "formats", "test-models", "viewer", "ARCHITECTURE", "decisions", "decoders",
                                  "ray", "roofline", "robustness-round4", "traces-as-recorded", "window"])
def test_docs_pages_carry_no_machine_paths(page: str) -> None:
    """No absolute path of one machine, no folder beside the checkout: a fresh clone has neither."""
    text = (ROOT / "docs" / f"{page}.md").read_text(encoding="utf-8")
    for marker in ("/work/", "/home/", "/tmp/"):
        assert marker not in text, f"docs/{page}.md names {marker}"
    # a relative path is a file of the clone, read from docs/ (a link), never a folder beside the checkout
    for rel in RELATIVE_PATH.findall(text):
        target = (ROOT / "docs" / rel).resolve()
        assert target.is_relative_to(ROOT) and target.exists(), f"docs/{page}.md names {rel}: not in a clone"


_INTERVAL = re.compile(r"(\d+\.\d+)x? \[(\d+\.\d+), (\d+\.\d+)\] (faster|slower|no difference|cannot tell)")


def _words_that_fit(lo: float, hi: float, time_ratio: bool) -> set[str]:
    """The verdicts an interval printed with these rounded ends can carry (every rounding corner)."""
    from fuseview.stats import verdict

    step = 0.5 * 10 ** -max(len(f"{lo}".split(".")[1]), 2)
    out = set()
    for a in (lo - step, lo + step):
        for b in (hi - step, hi + step):
            if 0 < a <= b:
                out.add(verdict(1 / b, 1 / a) if time_ratio else verdict(a, b))
    return out


def test_every_interval_a_doc_prints_carries_the_verdict_rule_word() -> None:
    """Issue 37.6: no doc calls [0.79, 1.27] 'no difference'. A speed-up (`1.93x [1.20, 3.93] faster`)
    is read as such; a bare ratio in a table row (the coverage matrix, the tune tables) is the time of
    the fused or tuned model over the original's (below 1: faster)."""
    bad = []
    for path, text in _texts():
        for line in text.splitlines():
            for m in _INTERVAL.finditer(line):
                lo, hi, word = float(m.group(2)), float(m.group(3)), m.group(4)
                time_ratio = "x [" not in m.group(0) and line.lstrip().startswith("|")
                if word not in _words_that_fit(lo, hi, time_ratio):
                    bad.append(f"{path.name}: {m.group(0)}")
    assert not bad, bad


# runs fuse on GPT-2 12 layers and two traces: a few seconds
def test_command_examples_are_what_the_commands_print() -> None:
    """Issue 37.6: README/docs examples of command output are the commands' real output, and the README's
    rule count the catalogue's (`python scripts/doc_examples.py` rewrites them)."""
    import importlib.util
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))  # its `import _requires`, as when run as a script
    spec = importlib.util.spec_from_file_location("doc_examples", ROOT / "scripts" / "doc_examples.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.stale(check_only=True) == []
