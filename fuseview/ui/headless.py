"""`fuseview open --plan/--apply/--profile`: open the window, do the named work in order, then screenshot.

--plan loads decisions (shown, not applied); --apply builds the fused model from the accepted candidates
(every candidate when there is no plan); --profile profiles the original and, if built, the fused model.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QTimer

from fuseview.errors import FuseviewError
from fuseview.graph.document import ModelDocument

TIMEOUT_MS = 600_000


def run_workbench(
    doc: ModelDocument,
    plan: str | None = None,
    apply: bool = False,
    profile: bool = False,
    screenshot: str | None = None,
    expansion_mode: str = "auto",
    size: tuple[int, int] = (1760, 1100),
) -> int:
    """Show the model, scan, open the plan, apply, profile; with screenshot, save a PNG and exit."""
    from fuseview.ui.app import ensure_app, grab_to_png
    from fuseview.ui.main_window import MainWindow

    if screenshot is not None and Path(screenshot).suffix.lower() != ".png":
        raise FuseviewError(f"{screenshot}: the screenshot must be a .png file")
    if screenshot is not None and not Path(screenshot).resolve().parent.is_dir():
        raise FuseviewError(f"{Path(screenshot).parent}: no such folder")
    if plan is not None and not Path(plan).is_file():
        raise FuseviewError(f"{plan}: no such plan file")
    app = ensure_app()
    win = MainWindow(expansion_mode=expansion_mode)
    win.resize(*size)
    wb = win.workbench
    status = {"code": 0, "done": False, "failed": False}
    unattended = screenshot is not None
    if unattended:
        win.show_dialogs = False
        win.remember_files = False

    def fail(message: str) -> None:
        if status["failed"]:
            return
        status["failed"] = True
        print(f"fuseview: error: {message}", file=sys.stderr)
        status["code"] = 2
        if unattended:
            app.exit(2)

    def finish() -> None:
        if status["done"]:
            return
        status["done"] = True
        if not unattended:
            return

        def settled(then) -> None:  # run then() once no layout job is running
            if win.busy:
                QTimer.singleShot(50, lambda: settled(then))
            else:
                then()

        def shoot() -> None:
            try:
                grab_to_png(win, screenshot)
            except FuseviewError as exc:
                fail(str(exc))
                return
            app.exit(0)

        def picture() -> None:
            select_fused(win)
            settled(lambda: QTimer.singleShot(300, shoot))

        arrange(win)
        settled(picture)

    def profile_step() -> None:
        pp = win.profile_panel
        if not profile:
            finish()
            return
        if pp is None:
            fail("the profile panel is not available in this build")
            return
        pp.profileFinished.connect(lambda _r: finish())
        pp.profileFailed.connect(fail)
        pp.show()
        wb.tidy_docks()
        pp.start_profile()

    def scanned() -> None:
        if plan is not None:
            try:
                unknown = wb.open_plan(plan)
            except FuseviewError as exc:
                fail(str(exc))
                return
            if unknown:
                print(
                    f"fuseview: {len(unknown)} plan decisions name candidates not in this model: "
                    + ", ".join(unknown[:5]),
                    file=sys.stderr,
                )
        if apply and plan is None:
            wb.panel.accept_all()
        if apply:
            wb.applied.connect(profile_step)
            if not wb.apply():
                profile_step()  # nothing accepted: profile (and show) the original only
            return
        profile_step()

    wb.scanned.connect(scanned)
    win.error_shown.connect(fail)
    if unattended:
        QTimer.singleShot(TIMEOUT_MS, lambda: fail("timed out waiting for the work to finish"))
    win.show()
    win.show_document(doc)
    code = app.exec()
    win.runner.shutdown()
    if win.profile_panel is not None and hasattr(win.profile_panel, "shutdown"):
        win.profile_panel.shutdown()
    return code or status["code"]


def _first_candidate(win) -> str | None:
    d = win.workbench.decisions
    if d is None or not d.candidates:
        return None
    done = (c.id for c in d.candidates if d.status(c.id) in ("applied", "accepted"))
    return next(done, d.candidates[0].id)


def arrange(win) -> None:
    """Make the window presentable for a picture: docks sized, the first applied candidate outlined."""
    wb = win.workbench
    wb.tidy_docks()
    wb.set_pane_mode(wb.pane_mode)
    first = _first_candidate(win)
    if first is not None:
        wb.panel.select_id(first)  # may open groups (a background re-layout on big graphs)


def select_fused(win) -> None:
    """Select the fused node of the outlined candidate: the linked selection marks its originals."""
    wb = win.workbench
    first = _first_candidate(win)
    if wb.fused is None or first is None:
        return
    nodes = set(wb.decisions.by_id[first].nodes)
    names = [n for n, origin in wb.links.to_original.items() if set(origin) & nodes]
    wb.select_fused(names[:1])
