"""The Open Recent list, kept in QSettings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMenu

MAX_RECENT = 10


class RecentFiles:
    """Recently opened model files, newest first, and the menu that lists them."""

    def __init__(self, settings: QSettings) -> None:
        self.settings = settings

    def files(self) -> list[str]:
        """Recently opened files, newest first."""
        value = self.settings.value("recent", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or [])]

    def remember(self, path: str) -> None:
        """Put path first in the list (resolved, without duplicates, at most MAX_RECENT)."""
        p = str(Path(path).resolve())
        files = [p] + [f for f in self.files() if f != p]
        self.settings.setValue("recent", files[:MAX_RECENT])
        self.settings.sync()

    def fill_menu(self, menu: QMenu, open_file: Callable[[str], object]) -> None:
        """List the files in menu (numbered shortcuts), then 'Clear list'."""
        menu.clear()
        files = self.files()
        if not files:
            menu.addAction("(none)").setEnabled(False)
            return
        for i, f in enumerate(files):
            act = menu.addAction(f"&{i + 1 if i < 9 else 0}  {Path(f).name}  —  {Path(f).parent}")
            act.triggered.connect(lambda _=False, f=f: open_file(f))
        menu.addSeparator()
        menu.addAction("Clear list", lambda: self.settings.setValue("recent", []))
