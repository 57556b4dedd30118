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
    fusion: dict | None = None,
) -> int:
    """Show the model, scan, open the plan, tune (tune: its budget in seconds), apply, profile; with
    screenshot, wait for all of it, save a PNG of the window (size: WxH, else the screen's; tab: what it
    shows, ui.workspace.PlotsWorkspace.show_tab) and exit. fusion: the session's FusionSettings fields."""
    from fuseview.ui.main_window import MainWindow
    from fuseview.ui.qt_app import ensure_app

    if screenshot is not None:
        check_screenshot_path(screenshot)
    if plan is not None:
        check_regular(plan, "plan", "plan")  # a FIFO or /dev/zero is refused before the window opens
    app = ensure_app()
    win = MainWindow(expansion_mode=expansion_mode)
    win.resize(*window_size(app, size))
    win.session.set_fusion_settings(**(fusion or {}))  # before the model opens: its scan is for them
    if tab is not None:
        check_tab(win.workbench.workspace, tab)  # a name no tab has: one line, exit 2, before any work
    return _WorkbenchRun(app, win, plan, apply, profile, screenshot, tab, tune).run(doc)


class _WorkbenchRun:
    """One run of the window: scan, then plan, tune, apply and profile in that order; unattended (with a
    screenshot), a picture once all of it has settled, then the loop ends."""

    def __init__(self, app, win, plan: str | None, apply: bool, profile: bool, screenshot: str | None,
                 tab: str | None, tune: float | None) -> None:
        self.app, self.win, self.wb = app, win, win.workbench
        self.plan, self.apply, self.profile, self.tune = plan, apply, profile, tune
        self.screenshot, self.tab = screenshot, tab
        self.status = {"code": 0, "done": False, "failed": False}
        self.unattended = screenshot is not None
        if self.unattended:
            win.show_dialogs = False
            win.remember_files = False

    def fail(self, message: str) -> None:
        """One line on stderr, exit code 2 (the first failure only); unattended, the loop ends."""
        if self.status["failed"]:
            return
        self.status["failed"] = True
        print(f"fuseview: error: {one_line(message)}", file=sys.stderr)
        self.status["code"] = 2
        if self.unattended:
            self.app.exit(2)

    def _settled(self, then) -> None:
        """then() once no job (layout, scan, onnxruntime check) is running."""
        if pending_work(self.win):
            QTimer.singleShot(50, lambda: self._settled(then))
        else:
            then()

    def _shoot(self) -> None:
        from fuseview.ui.qt_app import grab_to_png

        for legend in self.win.findChildren(Legend):  # settled now, not by a timer that may come late
            legend.settle()
        try:
            grab_to_png(self.win, self.screenshot)
        except FuseviewError as exc:
            self.fail(str(exc))
            return
        self.app.exit(0)

    def _picture(self) -> None:
        select_fused(self.win)
        try:
            if self.tab is not None:
                self.wb.workspace.show_tab(self.tab)
        except FuseviewError as exc:
            self.fail(str(exc))
            return
        if self.wb.session.fused is not None:
            self.wb.fit_panes()  # the outlines stay; the panes show what they open on, not the candidate
        # the views fit their graphs once laid out at the final size, then the legends settle
        self._settled(lambda: QTimer.singleShot(300, lambda: self._settled(self._shoot)))

    def finish(self) -> None:
        """The named work is done: unattended, take the picture once the window has settled."""
        if self.status["done"]:
            return
        self.status["done"] = True
        if self.unattended:
            arrange(self.win, outline=bool(self.plan or self.apply or self.profile))
            self._settled(self._picture)

    def _profile_step(self) -> None:
        pp = self.win.profile_panel
        if not self.profile:
            self.finish()
            return
        if pp is None:
            self.fail("the profile panel is not available in this build")
            return
        pp.profileFinished.connect(lambda _r: self.finish())
        pp.profileFailed.connect(self.fail)
        pp.show()
        self.wb.tidy_docks()
        pp.start_profile()

    def _scanned(self) -> None:
        if self.tune is None:
            self._after_scan()
            return
        from fuseview.session.exports import TuneSettings

        self.wb.tuner.finished.connect(lambda _result: self._after_scan())
        self.wb.tuner.failed.connect(self.fail)
        if self.wb.tuner.start(TuneSettings(threads=1, budget_s=self.tune)) is None:
            self.fail("the tune could not start")

    def _after_scan(self) -> None:
        wb = self.wb
        if self.plan is not None:
            try:
                unknown = wb.open_plan(self.plan)
            except FuseviewError as exc:
                self.fail(str(exc))
                return
            if unknown:
                print(f"fuseview: {len(unknown)} plan decisions name candidates not in this model: "
                      + ", ".join(unknown[:5]), file=sys.stderr)
        if self.apply and self.plan is None and self.tune is None:
            wb.panel.accept_all()
        if self.apply:
            wb.applied.connect(self._profile_step)
            if not wb.apply():
                self._profile_step()  # nothing accepted: profile (and show) the original only
            return
        self._profile_step()

    def run(self, doc: ModelDocument) -> int:
        """Show the document and run the event loop until the work (and picture) ends; the exit code."""
        from fuseview.ui.qt_app import end_on_signals

        app, win = self.app, self.win
        self.wb.scanned.connect(self._scanned)
        win.error_shown.connect(self.fail)
        if self.unattended:
            QTimer.singleShot(TIMEOUT_MS, lambda: self.fail("timed out waiting for the work to finish"))
        restore_signals = end_on_signals(app, win, self.status)
        win.show()
        win.show_document(doc)
        if self.unattended:
            with exit_on_loop_error(app) as loop:
                code = app.exec()
            self.status["code"] = self.status["code"] or loop["code"]
        else:
            code = app.exec()
        restore_signals()
        win.session.jobs.shutdown()
        win.end_jobs()
        return code or self.status["code"]


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
