"""The workbench's file dialogs: save the fused model and the plan (the session refuses the source), open a
plan, export the profile, and asking about unsaved work before the window drops it."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QFileDialog


class WorkbenchFiles:
    """The workbench's file dialogs; the session does the writing and refuses the source model."""

    def __init__(self, wb) -> None:
        self.wb = wb  # the Workbench: its window, session and panels

    # files ----------------------------------------------------------------------------------------
    def _source(self) -> Path | None:
        return self.wb.session.source_path()

    def save_unsaved(self) -> bool:
        """Ask where to save each unsaved thing; True when all of it was saved."""
        if self.wb.session.fused is not None and not self.wb.session.fused.saved:
            self.choose_save_fused()
        if self.wb.session.decisions is not None and not self.wb.session.decisions_saved():
            self.choose_save_plan()
        return not self.wb.session.unsaved()

    def open_plan(self, path: str | os.PathLike) -> list[str]:
        """Apply a plan's decisions by id (one undoable step); returns the ids this model lacks."""
        unknown = self.wb.session.open_plan(path)
        self.wb.panel.refresh()  # the graph is repainted by the session's decisions event
        msg = f"Plan {Path(path).name}: {len(self.wb.session.decisions.accepted())} accepted"
        if unknown:
            msg += f"; {len(unknown)} decisions name candidates not in this model: {', '.join(unknown[:3])}"
        self.wb.win.session.set_status(msg, 15000)
        return unknown

    def _save_dialog(self, title: str, name: str, filt: str) -> str:
        src = self._source()
        start = str((src.parent if src else Path.cwd()) / name)
        path, _ = QFileDialog.getSaveFileName(self.wb.win, title, start, filt)
        return path

    def _guard(self, title: str, fn) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - shown to the user, the window stays
            self.wb.win.error(title, exc)

    def _stem(self) -> str:
        src = self._source()
        fp16 = ".fp16" if self.wb.session.converted_from is not None else ""  # the float16 conversion's
        return (src.stem if src else "model") + fp16

    def choose_save_fused(self) -> None:
        """File → Fusion → Save Fused Model."""
        path = self._save_dialog("Save fused model", f"{self._stem()}.fused.onnx", "ONNX (*.onnx)")
        if path:
            self._guard("Cannot save the fused model", lambda: self._said(self.wb.session.save_fused(path)))

    def choose_save_plan(self) -> None:
        """File → Fusion → Save Plan."""
        path = self._save_dialog("Save plan", f"{self._stem()}.plan.json", "Plan (*.json)")
        if path:
            self._guard("Cannot save the plan", lambda: self._said(self.wb.session.save_plan(path)))

    def choose_open_plan(self) -> None:
        """File → Fusion → Open Plan."""
        src = self._source()
        path, _ = QFileDialog.getOpenFileName(
            self.wb.win, "Open plan", str(src.parent) if src else "", "Plan (*.json);;All files (*)"
        )
        if path:
            self._guard("Cannot open the plan", lambda: self.open_plan(path))

    def choose_save_report(self) -> None:
        """File → Fusion → Save Profile Report (the profile panel writes it)."""
        pp = self.wb.profile_panel
        if pp.report() is None:
            self.wb.win.session.set_status("No profile yet: run one in the Profile panel.", 8000)
            return
        path = self._save_dialog("Save profile report", f"{self._stem()}.profile.json", "Report (*.json)")
        if path:
            self._guard("Cannot save the report", lambda: (pp.save_report(path), self._said(Path(path))))

    def choose_export_plots(self, fmt: str = "png") -> None:
        """File → Fusion → Export Profile Plots (PNG or SVG, one file per plot)."""
        pp = self.wb.profile_panel
        if pp.report() is None:
            self.wb.win.session.set_status("No profile yet: run one in the Profile panel.", 8000)
            return
        folder = QFileDialog.getExistingDirectory(self.wb.win, "Export plots into folder")
        if folder:
            self._guard(
                "Cannot export plots",
                lambda: self.wb.win.session.set_status(
                    f"Wrote {len(pp.export_plots(folder, fmt))} plots to {folder}", 8000
                ),
            )

    def _said(self, path: Path) -> None:
        self.wb.win.session.set_status(f"Wrote {path}", 8000)
