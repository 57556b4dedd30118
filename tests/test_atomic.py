"""Atomic writes: the target is replaced whole or not at all, and no temp file is left behind."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from fuseview.atomic import write_atomic, write_text_atomic
from fuseview.errors import FuseviewError
from fuseview.graph.save import save_model_atomic
from tests.conftest import GPT2_MODELS


def test_failed_write_keeps_the_old_file_and_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")

    def half_then_fail(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise OSError("disk full")

    with pytest.raises(FuseviewError, match="disk full"):
        write_atomic(target, half_then_fail)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_empty_result_is_refused_when_asked(tmp_path: Path) -> None:
    with pytest.raises(FuseviewError, match="nothing was written"):
        write_atomic(tmp_path / "x.png", lambda tmp: None, allow_empty=False)
    assert list(tmp_path.iterdir()) == []


def test_missing_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FuseviewError, match="does not exist"):
        write_text_atomic(tmp_path / "nope" / "a.txt", "x")


def test_model_round_trips_and_is_readable(tmp_path: Path) -> None:
    model = onnx.load(str(GPT2_MODELS / "gpt2_2l_ts17.onnx"))
    out = save_model_atomic(model, tmp_path / "copy.onnx")
    assert onnx.load(str(out)).SerializeToString() == model.SerializeToString()
    assert out.stat().st_mode & 0o044  # not the 0600 of a bare temp file


def test_publish_folder_replaces_a_folder_only_when_the_new_one_is_complete(tmp_path):
    import os

    from fuseview.atomic import publish_folder

    out = tmp_path / "cap"
    out.mkdir()
    (out / "old.txt").write_text("earlier")
    new = tmp_path / ".fuseview-new"
    new.mkdir(mode=0o700)
    (new / "new.txt").write_text("complete")
    assert publish_folder(new, out) == out
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"] and not new.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["cap"]  # the earlier folder is not left aside
    assert out.stat().st_mode & 0o777 == 0o777 & ~_umask()  # as mkdir makes it, not mkdtemp's 0700
    for other in ("link", "file"):  # a link or a file at out is refused, never replaced
        target = tmp_path / other
        if other == "link":
            os.symlink(out, target)
        else:
            target.write_text("x")
        fresh = tmp_path / f".fuseview-{other}"
        fresh.mkdir()
        with pytest.raises(FuseviewError, match="not a folder"):
            publish_folder(fresh, target)
        assert target.is_symlink() if other == "link" else target.read_text() == "x"


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask
