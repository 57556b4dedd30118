"""The workbench's file dialogs: save the fused model and the plan (the session refuses the source), open a
plan, export the profile, and asking about unsaved work before the window drops it."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QFileDialog


class WorkbenchFiles:
    """Saving and opening the workbench's files (a part of Workbench); the session does the writing."""

    # files ----------------------------------------------------------------------------------------
    def _source(self) -> Path | None:
        return self.session.source_path()

    def save_fused(self, path: str | os.PathLike) -> Path:
        """Write the fused model atomically (never over the source model)."""
        return self.session.save_fused(path)

    def save_plan(self, path: str | os.PathLike) -> Path:
        """Write the decisions as a plan JSON (atomic)."""
        return self.session.save_plan(path)

    # unsaved work ---------------------------------------------------------------------------------
    def unsaved(self) -> list[str]:
        """What would be lost now: 'N decisions' not saved as a plan, 'the fused model' not saved."""
        return self.session.unsaved()

    def save_unsaved(self) -> bool:
        """Ask where to save each unsaved thing; True when all of it was saved."""
        if self.fused is not None and not self.fused.saved:
            self.choose_save_fused()
        if self.decisions is not None and not self.session.decisions_saved():
            self.choose_save_plan()
        return not self.unsaved()

    def open_plan(self, path: str | os.PathLike) -> list[str]:
        """Apply a plan's decisions by id (one undoable step); returns the ids this model lacks."""
        unknown = self.session.open_plan(path)
        self.panel.refresh()
        self._paint_original()
        msg = f"Plan {Path(path).name}: {len(self.decisions.accepted())} accepted"
        if unknown:
            msg += f"; {len(unknown)} decisions name candidates not in this model: {', '.join(unknown[:3])}"
        self.win.statusBar().showMessage(msg, 15000)
        return unknown

    def _save_dialog(self, title: str, name: str, filt: str) -> str:
        src = self._source()
        start = str((src.parent if src else Path.cwd()) / name)
        path, _ = QFileDialog.getSaveFileName(self.win, title, start, filt)
        return path

    def _guard(self, title: str, fn) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - shown to the user, the window stays
            self.win.error(title, exc)

    def _stem(self) -> str:
        src = self._source()
        return src.stem if src else "model"

    def choose_save_fused(self) -> None:
        """File → Fusion → Save Fused Model."""
        path = self._save_dialog("Save fused model", f"{self._stem()}.fused.onnx", "ONNX (*.onnx)")
        if path:
            self._guard("Cannot save the fused model", lambda: self._said(self.save_fused(path)))

    def choose_save_plan(self) -> None:
        """File → Fusion → Save Plan."""
        path = self._save_dialog("Save plan", f"{self._stem()}.plan.json", "Plan (*.json)")
        if path:
            self._guard("Cannot save the plan", lambda: self._said(self.save_plan(path)))

    def choose_open_plan(self) -> None:
        """File → Fusion → Open Plan."""
        src = self._source()
        path, _ = QFileDialog.getOpenFileName(
            self.win, "Open plan", str(src.parent) if src else "", "Plan (*.json);;All files (*)"
        )
        if path:
            self._guard("Cannot open the plan", lambda: self.open_plan(path))

    def choose_save_report(self) -> None:
        """File → Fusion → Save Profile Report (the profile panel writes it)."""
        pp = self.profile_panel
        if pp.report() is None:
            self.win.statusBar().showMessage("No profile yet: run one in the Profile panel.", 8000)
            return
        path = self._save_dialog("Save profile report", f"{self._stem()}.profile.json", "Report (*.json)")
        if path:
            self._guard("Cannot save the report", lambda: (pp.save_report(path), self._said(Path(path))))

    def choose_export_plots(self, fmt: str = "png") -> None:
        """File → Fusion → Export Profile Plots (PNG or SVG, one file per plot)."""
        pp = self.profile_panel
        if pp.report() is None:
            self.win.statusBar().showMessage("No profile yet: run one in the Profile panel.", 8000)
            return
        folder = QFileDialog.getExistingDirectory(self.win, "Export plots into folder")
        if folder:
            self._guard(
                "Cannot export plots",
                lambda: self.win.statusBar().showMessage(
                    f"Wrote {len(pp.export_plots(folder, fmt))} plots to {folder}", 8000
                ),
            )

    def _said(self, path: Path) -> None:
        self.win.statusBar().showMessage(f"Wrote {path}", 8000)
