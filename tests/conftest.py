"""Shared fixtures: paths to real models, and headless Qt."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parent.parent
SHARED_MODELS = ROOT.parent / "shared" / "models"
ONNX_BACKEND_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"


def shared_models() -> list[Path]:
    """The GPT-2 exports in ../shared/models (CI has them)."""
    return sorted(SHARED_MODELS.glob("*.onnx"))


def backend_models() -> list[Path]:
    """Every model in the onnx package's backend test data."""
    return sorted(ONNX_BACKEND_DATA.rglob("*.onnx"))


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED_MODELS.is_dir():
        pytest.fail(f"{SHARED_MODELS} is missing: CI and the README assume ../shared beside the checkout")
    return SHARED_MODELS
