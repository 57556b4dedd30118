"""Message boxes, behind one function each so tests (and future panels) can intercept them."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

from fuseview.errors import FuseviewError, user_error_message
from fuseview.textsafe import one_line


def error_text(exc: BaseException) -> str:
    """A one-line message for an exception: the FuseviewError text, the input refusal (onnx, onnxruntime,
    decoding) or the type and message of others; control characters escaped, shortened to 500."""
    if isinstance(exc, FuseviewError):
        text = str(exc)
    else:
        text = user_error_message(exc) or f"{type(exc).__name__}: {exc}"
    return one_line(" ".join(text.split()), 500)


def show_error(parent: QWidget | None, title: str, message: str) -> None:
    """A modal error box with a one-line message."""
    QMessageBox.critical(parent, title, message)


SAVE, DISCARD, CANCEL = "save", "discard", "cancel"


def ask_unsaved(parent: QWidget | None, title: str, message: str) -> str:
    """Save / Discard / Cancel for unsaved work; returns SAVE, DISCARD or CANCEL."""
    b = QMessageBox.StandardButton
    answer = QMessageBox.warning(parent, title, message, b.Save | b.Discard | b.Cancel, b.Save)
    if answer == b.Save:
        return SAVE
    return DISCARD if answer == b.Discard else CANCEL
