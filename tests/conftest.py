"""Shared fixtures: paths to real models, and headless Qt."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The measured roofline is cached per user (runtime.machine): a test run keeps its own, in a folder removed
# at exit, so it neither reads a figure measured outside the run nor leaves one behind.
if "FUSEVIEW_TEST_CACHE" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _cache = tempfile.mkdtemp(prefix="fuseview-cache-")
    os.environ["FUSEVIEW_TEST_CACHE"] = os.environ["XDG_CACHE_HOME"] = _cache
    atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], True)

# Each pytest-xdist worker gets its own temp folder, so a test that checks it leaves nothing behind in the
# temp folder never sees another worker's files.
if os.environ.get("PYTEST_XDIST_WORKER") and "FUSEVIEW_WORKER_TMP" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _worker_tmp = tempfile.mkdtemp(prefix=f"fuseview-{os.environ['PYTEST_XDIST_WORKER']}-")
    os.environ["FUSEVIEW_WORKER_TMP"] = os.environ["TMPDIR"] = tempfile.tempdir = _worker_tmp
    atexit.register(shutil.rmtree, _worker_tmp, True)

ROOT = Path(__file__).resolve().parent.parent
# Small GPT-2 exports (2 and 12 layers, TorchScript opsets 13/17 and dynamo) kept in the repo, so a fresh
# clone with nothing beside it runs the whole suite.
GPT2_MODELS = ROOT / "tests" / "data" / "gpt2"
ASSET_MODELS = ROOT / "assets" / "models"
ONNX_BACKEND_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"


def gpt2_models() -> list[Path]:
    """The GPT-2 exports in tests/data/gpt2."""
    return sorted(GPT2_MODELS.glob("*.onnx"))


def backend_models() -> list[Path]:
    """Every model in the onnx package's backend test data."""
    return sorted(ONNX_BACKEND_DATA.rglob("*.onnx"))


@pytest.fixture(autouse=True)
def _discard_unsaved_work_on_close(monkeypatch):
    """A window closed at a test's end never waits on a modal Save/Discard/Cancel box: it discards."""
    from fuseview.ui import dialogs  # imported here, so a test that imports the window later is covered too

    monkeypatch.setattr(dialogs, "ask_unsaved", lambda parent, title, message: dialogs.DISCARD)
