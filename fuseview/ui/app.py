"""Create the Qt application and run the window (optionally just to take a screenshot)."""

from __future__ import annotations

import os
import sys

from PySide6.QtCore import QTimer

from fuseview.graph.document import ModelDocument

# re-exported: their home is ui.qt_app, which ui.headless imports without a cycle
from fuseview.ui.qt_app import end_on_signals as end_on_signals
from fuseview.ui.qt_app import ensure_app as ensure_app
from fuseview.ui.qt_app import grab_to_png as grab_to_png


def run_app(
    doc: ModelDocument | None = None,
    path: str | None = None,
    expansion_mode: str = "auto",
    screenshot: str | None = None,
    size: tuple[int, int] = (1400, 900),
    end_process: bool = False,
) -> int:
    """Show the window with a loaded document (or open path); with screenshot, save a PNG and exit.

    end_process (the command line): once the window has closed, its jobs ended and its settings are
    written, end the process at once instead of tearing down every graph item one by one (~0.5 s).
    """
    from fuseview.textsafe import one_line
    from fuseview.ui.headless import check_screenshot_path, exit_on_loop_error
    from fuseview.ui.main_window import MainWindow

    if screenshot is not None:
        check_screenshot_path(screenshot)
    app = ensure_app()
    win = MainWindow(expansion_mode=expansion_mode)
    win.resize(*size)
    status = {"code": 0}
    if screenshot is not None:
        win.show_dialogs = False
        win.remember_files = False

        def failed(message: str) -> None:
            print(f"fuseview: error: {one_line(message)}", file=sys.stderr)
            status["code"] = 2
            app.exit(2)

        def shoot() -> None:
            grab_to_png(win, screenshot)
            app.exit(0)

        win.error_shown.connect(failed)
        win.document_shown.connect(lambda: QTimer.singleShot(150, shoot))
        QTimer.singleShot(600_000, lambda: (failed("timed out waiting for the layout"), None))
    restore_signals = end_on_signals(app, win, status)
    win.show()
    if doc is not None:
        win.show_document(doc)
    elif path is not None:
        win.open_file(path)
    if screenshot is not None:
        with exit_on_loop_error(app) as loop:  # an error inside the loop ends it at once, in one line
            code = app.exec()
        status["code"] = status["code"] or loop["code"]
    else:
        code = app.exec()
    restore_signals()
    win.session.jobs.shutdown()
    win.settings.sync()
    code = code or status["code"]
    if end_process:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
