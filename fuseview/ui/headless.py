"""`fuseview open --plan/--apply/--profile`: open the window, do the named work in order, then screenshot.

--plan loads decisions (shown, not applied); --apply builds the fused model from the accepted candidates
(every candidate when there is no plan); --profile profiles the original and, if built, the fused model.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from PySide6.QtCore import QTimer

from fuseview.atomic import check_output
from fuseview.errors import FuseviewError, user_error_message
from fuseview.graph.document import ModelDocument
from fuseview.safe_io import check_regular
from fuseview.textsafe import one_line
from fuseview.ui.legend import Legend
from fuseview.ui.workspace import check_tab

TIMEOUT_MS = 600_000
# the size of an unattended window when the screen is not a real one (offscreen, minimal: 800×800)
DEFAULT_SIZE = (1400, 900)
VIRTUAL_PLATFORMS = ("offscreen", "minimal")


@contextlib.contextmanager
def exit_on_loop_error(app) -> Iterator[dict]:
    """While the event loop runs in the block, an exception raised in a slot prints one line on stderr
    and ends the loop at once (exit 2 for bad input, 1 for a fuseview bug) instead of being lost."""
    state = {"code": 0}
    previous = sys.excepthook

    def hook(etype, exc, tb) -> None:
        if state["code"] == 0:
            message = str(exc) if isinstance(exc, FuseviewError) else user_error_message(exc)
            state["code"] = 2 if message is not None else 1
            if message is None:
                message = f"internal error: {etype.__name__}: {exc}"
            print(f"fuseview: error: {one_line(message)}", file=sys.stderr)
        app.exit(state["code"])

    sys.excepthook = hook
    try:
        yield state
    finally:
        sys.excepthook = previous


def check_screenshot_path(screenshot: str) -> None:
    """Refuse a screenshot path before any window appears: not .png, no folder, or not writable there."""
    if Path(screenshot).suffix.lower() != ".png":
        raise FuseviewError(f"{screenshot}: the screenshot must be a .png file")
    if not Path(screenshot).resolve().parent.is_dir():
        raise FuseviewError(f"{Path(screenshot).parent}: no such folder")
    check_output(screenshot)  # not an input of this run, a folder or a device


def window_size(app, size: tuple[int, int] | None = None) -> tuple[int, int]:
    """The size asked for, else the screen's free area (a virtual screen: DEFAULT_SIZE)."""
    if size is not None:
        return size
    screen = app.primaryScreen()
    if screen is None or app.platformName() in VIRTUAL_PLATFORMS:
        return DEFAULT_SIZE
    free = screen.availableGeometry()
    return free.width(), free.height()


def pending_work(win) -> list[str]:
    """What the window is still doing that a picture of it would miss (empty: the picture is complete)."""
    left = [j.title for j in win.session.jobs.active()]  # load, layout, scan, onnxruntime check, apply
    if win.doc is not None and win.workbench.session.decisions is None and win.session.on_root:
        left.append("scan not delivered")
    return left


def run_workbench(
    doc: ModelDocument,
    plan: str | None = None,
    apply: bool = False,
    profile: bool = False,
    screenshot: str | None = None,
    expansion_mode: str = "auto",
    size: tuple[int, int] | None = None,
    tab: str | None = None,
    tune: float | None = None,
) -> int:
    """Show the model, scan, open the plan, tune (tune: its budget in seconds), apply, profile; with
    screenshot, wait for all of it, save a PNG of the window (size: WxH, else the screen's; tab: what it
    shows, ui.workspace.PlotsWorkspace.show_tab) and exit."""
    from fuseview.ui.main_window import MainWindow
    from fuseview.ui.qt_app import ensure_app, grab_to_png

    if screenshot is not None:
        check_screenshot_path(screenshot)
    if plan is not None:
        check_regular(plan, "plan", "plan")  # a FIFO or /dev/zero is refused before the window opens
    app = ensure_app()
    win = MainWindow(expansion_mode=expansion_mode)
    win.resize(*window_size(app, size))
    wb = win.workbench
    if tab is not None:
        check_tab(wb.workspace, tab)  # a name no tab has: one line, exit 2, before any work
    status = {"code": 0, "done": False, "failed": False}
    unattended = screenshot is not None
    if unattended:
        win.show_dialogs = False
        win.remember_files = False

    def fail(message: str) -> None:
        if status["failed"]:
            return
        status["failed"] = True
        print(f"fuseview: error: {one_line(message)}", file=sys.stderr)
        status["code"] = 2
        if unattended:
            app.exit(2)

    def finish() -> None:
        if status["done"]:
            return
        status["done"] = True
        if not unattended:
            return

        def settled(then) -> None:  # run then() once no job (layout, scan, onnxruntime check) is running
            if pending_work(win):
                QTimer.singleShot(50, lambda: settled(then))
            else:
                then()

        def shoot() -> None:
            for legend in win.findChildren(Legend):  # settled now, not by a timer that may come late
                legend.settle()
            try:
                grab_to_png(win, screenshot)
            except FuseviewError as exc:
                fail(str(exc))
                return
            app.exit(0)

        def picture() -> None:
            select_fused(win)
            try:
                if tab is not None:
                    wb.workspace.show_tab(tab)
            except FuseviewError as exc:
                fail(str(exc))
                return
            if wb.session.fused is not None:
                wb.fit_panes()  # the outlines stay; the panes show what they open on, not the candidate
            # the views fit their graphs once laid out at the final size, then the legends settle
            settled(lambda: QTimer.singleShot(300, lambda: settled(shoot)))

        arrange(win, outline=bool(plan or apply or profile))
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

    def tuned_then(then) -> None:
        if tune is None:
            then()
            return
        from fuseview.session.exports import TuneSettings

        wb.tuner.finished.connect(lambda _result: then())
        wb.tuner.failed.connect(fail)
        if wb.tuner.start(TuneSettings(threads=1, budget_s=tune)) is None:
            fail("the tune could not start")

    def scanned() -> None:
        tuned_then(after_scan)

    def after_scan() -> None:
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
        if apply and plan is None and tune is None:
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
    from fuseview.ui.qt_app import end_on_signals

    restore_signals = end_on_signals(app, win, status)
    win.show()
    win.show_document(doc)
    if unattended:
        with exit_on_loop_error(app) as loop:
            code = app.exec()
        status["code"] = status["code"] or loop["code"]
    else:
        code = app.exec()
    restore_signals()
    win.session.jobs.shutdown()
    win.end_jobs()
    return code or status["code"]


def _first_candidate(win) -> str | None:
    d = win.workbench.session.decisions
    if d is None or not d.candidates:
        return None
    done = (c.id for c in d.candidates if d.status(c.id) in ("applied", "accepted"))
    return next(done, d.candidates[0].id)


def arrange(win, outline: bool = True) -> None:
    """Make the window presentable for a picture: docks sized, (outline) the first applied candidate
    outlined."""
    wb = win.workbench
    wb.tidy_docks()
    wb.set_pane_mode(wb.pane_mode)
    first = _first_candidate(win) if outline else None
    if first is not None:
        wb.panel.select_id(first)  # may open groups (a background re-layout on big graphs)


def select_fused(win) -> None:
    """Select the fused node of the outlined candidate (its fused op, e.g. GroupQueryAttention, before a
    helper node the rule also made): the linked selection marks its originals."""
    wb = win.workbench
    first = _first_candidate(win)
    if wb.session.fused is None or first is None:
        return
    cand = wb.session.decisions.by_id[first]
    nodes = set(cand.nodes)
    names = [n for n, origin in wb.session.links.to_original.items() if set(origin) & nodes]
    graph = wb.session.fused.doc.graph

    def op(name: str) -> str:
        index = graph.node_by_name.get(name)
        return graph.nodes[index].op_type if index is not None else ""

    names.sort(key=lambda n: op(n) != cand.fused_op)  # stable: the fused op first, then file order
    wb.select_fused(names[:1])
