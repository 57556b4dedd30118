"""Create the Qt application and run the window (optionally just to take a screenshot)."""

from __future__ import annotations

import os
import sys

from fuseview.graph.document import ModelDocument

# re-exported: their home is ui.qt_app, which ui.headless imports without a cycle
from fuseview.ui.qt_app import end_on_signals as end_on_signals
from fuseview.ui.qt_app import ensure_app as ensure_app
from fuseview.ui.qt_app import grab_to_png as grab_to_png


def run_app(
    doc: ModelDocument | None = None,
    path: str | None = None,
    expansion_mode: str = "auto",
    size: tuple[int, int] = (1400, 900),
    end_process: bool = False,
    fusion: dict | None = None,
) -> int:
    """Show the window with a loaded document (or open path). Pictures: fuseview.ui.headless.run_workbench,
    which waits for the scan and the onnxruntime check.

    end_process (the command line): once the window has closed, its jobs ended and its settings are
    written, end the process at once instead of tearing down every graph item one by one (~0.5 s).
    fusion: the session's FusionSettings fields (open's --provider, --float16), set before the model opens.
    """
    from fuseview.ui.main_window import MainWindow

    app = ensure_app()
    win = MainWindow(expansion_mode=expansion_mode)
    win.resize(*size)
    win.session.set_fusion_settings(**(fusion or {}))
    status = {"code": 0}
    restore_signals = end_on_signals(app, win, status)
    win.show()
    if doc is not None:
        win.show_document(doc)
    elif path is not None:
        win.open_file(path)
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
