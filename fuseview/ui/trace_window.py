"""`fuseview trace DIR --window` and `fuseview open CAPTURE_DIR`: the trace workspace on its own, and with
--screenshot a picture of one of its tabs (--tab NAME) once the traces are read."""

from __future__ import annotations

import sys

from PySide6.QtCore import QTimer

from fuseview.errors import FuseviewError
from fuseview.textsafe import one_line
from fuseview.ui.headless import TIMEOUT_MS, check_screenshot_path, exit_on_loop_error, window_size
from fuseview.ui.workspace import find_tab, tab_names


def run_trace_window(
    paths: list[str],
    steps: int | None = None,
    provenance: str | None = None,
    screenshot: str | None = None,
    size: tuple[int, int] | None = None,
    tab: str | None = None,
) -> int:
    """Open the trace workspace on paths (one or two traces, or a capture folder); with screenshot, save
    a PNG of it (tab: which tab) once read and exit."""
    from fuseview.ui.qt_app import ensure_app, grab_to_png
    from fuseview.ui.trace_view import TraceView

    if screenshot is not None:
        check_screenshot_path(screenshot)
    app = ensure_app()
    view = TraceView()
    index = None
    if tab is not None:
        index = find_tab(view.tabs, tab)
        if index is None:
            names = ", ".join(tab_names(view.tabs))
            raise FuseviewError(f"--tab {tab!r}: no such tab of the trace workspace; choose one of: {names}")
    view.resize(*window_size(app, size))
    unattended = screenshot is not None
    view.show_dialogs = not unattended
    status = {"code": 0}

    def fail(message: str) -> None:
        if status["code"]:
            return
        status["code"] = 2
        print(f"fuseview: error: {one_line(message)}", file=sys.stderr)
        if unattended:
            app.exit(2)

    def shoot() -> None:
        try:
            grab_to_png(view, screenshot)
        except FuseviewError as exc:
            fail(str(exc))
            return
        app.exit(0)

    def loaded() -> None:
        if index is not None:
            view.tabs.setCurrentIndex(index)
        if unattended:
            QTimer.singleShot(400, shoot)  # the tab's plots lay themselves out at the final size first

    view.loaded.connect(loaded)
    view.failed.connect(fail)
    if unattended:
        QTimer.singleShot(TIMEOUT_MS, lambda: fail("timed out reading the traces"))
    view.show()
    view.open_traces(paths, steps, provenance)
    with exit_on_loop_error(app) as loop:
        code = app.exec()
    view.shutdown()
    return code or status["code"] or loop["code"]
