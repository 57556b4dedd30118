"""Issue 16: no writer replaces or writes through a symbolic link; outputs of one run are distinct files.

Each case runs the real `python -m fuseview` in its own process (tests/hostile_cli.py) and checks exit 2,
one `fuseview: error:` line, nothing written, the link still a link and its target unchanged.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fuseview.atomic import TEMP_PREFIX, clear_inputs, write_atomic
from fuseview.errors import FuseviewError
from tests import hostile_cases as hc
from tests.hostile_cli import refuse, run_cli

TRACE = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2,
                                     "pid": 1, "tid": 1}]})
PROFILE = ["--runs", "2", "--warmup", "0", "--quiet"]

# (label, argv with OUT where the output goes, output suffix)
WRITERS = [
    ("fuse -o", ["fuse", "m.onnx", "-o", "OUT"], ".onnx"),
    ("fuse --save-plan", ["fuse", "m.onnx", "-o", "f.onnx", "--save-plan", "OUT"], ".json"),
    ("render -o", ["render", "m.onnx", "-o", "OUT"], ".svg"),
    ("profile --json", ["profile", "m.onnx", *PROFILE, "--json", "OUT"], ".json"),
    ("trace --json", ["trace", "t.json", "--json", "OUT"], ".json"),
    ("open --screenshot", ["open", "m.onnx", "--screenshot", "OUT"], ".png"),
]


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "m.onnx").write_bytes(hc.mlp().SerializeToString())
    (tmp_path / "t.json").write_text(TRACE)
    (tmp_path / "other.txt").write_text("the link's target, not to be touched\n")
    return tmp_path


@pytest.mark.parametrize(("label", "argv", "suffix"), WRITERS, ids=[w[0] for w in WRITERS])
def test_no_writer_replaces_a_link_to_a_regular_file(tmp_path: Path, label, argv, suffix) -> None:
    folder = _folder(tmp_path)
    out = f"out{suffix}"
    os.symlink("other.txt", folder / out)
    refuse([out if a == "OUT" else a for a in argv], folder, match="symbolic link")
    assert (folder / out).is_symlink() and os.readlink(folder / out) == "other.txt"


@pytest.mark.parametrize("target", ["/proc/self/fd/1", "missing.json", "/dev/null"])
def test_a_link_like_dev_stdout_is_refused_with_stdout_redirected_to_a_file(tmp_path: Path, target) -> None:
    folder = _folder(tmp_path)
    (folder / "dev").mkdir()
    os.symlink(target, folder / "dev" / "stdout")  # what /dev/stdout is, without touching the real /dev
    with open(folder / "log.txt", "wb") as log:
        before = hc.snapshot(folder)
        run = run_cli(["trace", "t.json", "t.json", "--json", "dev/stdout"], folder, stdout=log)
    assert run.code == 2 and run.stderr.startswith("fuseview: error: ") and run.stderr.count("\n") == 1
    assert "symbolic link" in run.stderr
    assert (folder / "dev" / "stdout").is_symlink() and os.readlink(folder / "dev" / "stdout") == target
    assert (folder / "log.txt").read_bytes() == b"" and hc.snapshot(folder) == before
    assert not (folder / "missing.json").exists()


def test_a_link_that_appears_while_writing_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    (tmp_path / "other.txt").write_text("keep")

    def write(tmp: str) -> None:
        Path(tmp).write_text("new")
        os.symlink("other.txt", out)  # another process puts a link where we are about to rename

    with pytest.raises(FuseviewError, match="symbolic link|appeared"):
        write_atomic(out, write)
    assert out.is_symlink() and (tmp_path / "other.txt").read_text() == "keep"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TEMP_PREFIX)]
    clear_inputs()


def test_a_file_that_appears_while_writing_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"

    def write(tmp: str) -> None:
        Path(tmp).write_text("new")
        if not out.exists():
            os.mkfifo(out)

    with pytest.raises(FuseviewError, match="FIFO|appeared"):
        write_atomic(out, write)
    assert out.is_fifo()
    clear_inputs()


def test_a_folder_that_is_a_link_is_fine_and_the_file_in_it_is_written(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "real").mkdir()
    os.symlink("real", folder / "via")
    run = run_cli(["render", "m.onnx", "-o", "via/g.svg"], folder)
    assert run.code == 0, run.stderr
    assert (folder / "real" / "g.svg").is_file() and not (folder / "real" / "g.svg").is_symlink()


def test_a_regular_file_is_still_replaced(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "g.svg").write_text("old")
    run = run_cli(["render", "m.onnx", "-o", "g.svg"], folder)
    assert run.code == 0, run.stderr
    assert (folder / "g.svg").read_text().lstrip().startswith("<?xml")
