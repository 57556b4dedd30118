"""Message boxes, behind one function each so tests (and future panels) can intercept them."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QMenu, QMessageBox, QPushButton, QWidget

from fuseview.errors import error_text

__all__ = ["CANCEL", "DISCARD", "SAVE", "ask_unsaved", "error_text", "show_error"]


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


def export_plots_button(ask_export: Callable[[str], None]) -> QPushButton:
    """'Export plots…' with its PNG… / SVG… menu; ask_export(fmt) asks where and writes them."""
    button = QPushButton("Export plots…")
    menu = QMenu(button)
    menu.addAction("PNG…", lambda: ask_export("png"))
    menu.addAction("SVG…", lambda: ask_export("svg"))
    button.setMenu(menu)
    return button
