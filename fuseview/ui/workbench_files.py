"""The workbench's files: save the fused model and the plan (never over the source), open a plan, export
the profile, and what is unsaved when the window would drop it."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from PySide6.QtWidgets import QFileDialog

from fuseview.atomic import save_model_atomic
from fuseview.errors import FuseviewError


class WorkbenchFiles:
    """Saving and opening the workbench's files (a part of Workbench)."""

    # files ----------------------------------------------------------------------------------------
    def _source(self) -> Path | None:
        doc = self.root_doc
        return Path(doc.path).resolve() if doc is not None and doc.path else None

    def _refuse_source(self, path: Path) -> None:
        src = self._source()
        if src is not None and path.resolve() == src:
            raise FuseviewError(f"{path}: that is the source model; choose another file")

    def save_fused(self, path: str | os.PathLike) -> Path:
        """Write the fused model atomically (never over the source model)."""
        if self.fused is None:
            raise FuseviewError("nothing applied yet: accept candidates and Apply first")
        out = Path(path)
        self._refuse_source(out)
        if not out.resolve().parent.is_dir():
            raise FuseviewError(f"{out.parent}: no such folder")
        model: onnx.ModelProto = self.fused["model"]
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
            raise FuseviewError(
                "the model keeps weights in external files; saving those is not supported yet"
            )
        save_model_atomic(model, out)
        self.fused["saved"] = True
        return out

    def save_plan(self, path: str | os.PathLike) -> Path:
        """Write the decisions as a plan JSON (atomic)."""
        if self.decisions is None:
            raise FuseviewError("no candidates yet: open a model first")
        out = Path(path)
        self._refuse_source(out)
        self.decisions.save(out)
        self._saved_decisions = self._decision_snapshot()
        return out

    # unsaved work ---------------------------------------------------------------------------------
    def _decision_snapshot(self) -> dict:
        return dict(self.decisions.plan.decisions) if self.decisions is not None else {}

    def unsaved(self) -> list[str]:
        """What would be lost now: 'N decisions' not saved as a plan, 'the fused model' not saved."""
        what = []
        if self.decisions is not None and self._decision_snapshot() != self._saved_decisions:
            n = len(self._decision_snapshot())
            what.append(f"{n} decision{'s' if n != 1 else ''}")
        if self.fused is not None and not self.fused.get("saved"):
            what.append("the fused model")
        return what

    def save_unsaved(self) -> bool:
        """Ask where to save each unsaved thing; True when all of it was saved."""
        if self.fused is not None and not self.fused.get("saved"):
            self.choose_save_fused()
        if self.decisions is not None and self._decision_snapshot() != self._saved_decisions:
            self.choose_save_plan()
        return not self.unsaved()

    def open_plan(self, path: str | os.PathLike) -> list[str]:
        """Apply a plan's decisions by id (one undoable step); returns the ids this model lacks."""
        if self.decisions is None:
            raise FuseviewError("no candidates yet: open a model first")
        unknown = self.decisions.load(path)
        self._saved_decisions = self._decision_snapshot()  # what is on screen is what the file says
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
        if pp is None or pp.report() is None:
            self.win.statusBar().showMessage("No profile yet: run one in the Profile panel.", 8000)
            return
        path = self._save_dialog("Save profile report", f"{self._stem()}.profile.json", "Report (*.json)")
        if path:
            self._guard("Cannot save the report", lambda: (pp.save_report(path), self._said(Path(path))))

    def choose_export_plots(self, fmt: str = "png") -> None:
        """File → Fusion → Export Profile Plots (PNG or SVG, one file per plot)."""
        pp = self.profile_panel
        if pp is None or pp.report() is None:
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
