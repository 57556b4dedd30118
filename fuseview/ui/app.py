"""Create the Qt application and run the window (optionally just to take a screenshot)."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from pathlib import Path

from PySide6.QtCore import QSocketNotifier, QtMsgType, qInstallMessageHandler
from PySide6.QtWidgets import QApplication

from fuseview.errors import FuseviewError
from fuseview.graph.document import ModelDocument

# Platform plugins without a window manager (offscreen, minimal) say this for every dock and tool bar
# laid out; it is noise, not a fault, in headless runs and tests.
_QUIET_MESSAGES = ("does not support propagateSizeHints()",)


def _qt_message(kind: QtMsgType, _context, message: str) -> None:
    if kind in (QtMsgType.QtDebugMsg, QtMsgType.QtInfoMsg) or any(q in message for q in _QUIET_MESSAGES):
        return
    print(f"Qt: {message}", file=sys.stderr)


def ensure_app() -> QApplication:
    """The running QApplication, or a new one (offscreen when there is no display)."""
    app = QApplication.instance()
    if app is not None:
        return app  # type: ignore[return-value]
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("QT_QPA_PLATFORM")
    ):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    qInstallMessageHandler(_qt_message)
    app = QApplication(sys.argv[:1])
    # Workers run pure-Python jobs (layout, fusion scan) while the UI thread paints, and every Python call
    # the UI thread makes (an item's paint, a timer) must win the GIL back from them. At the default 5 ms
    # switch interval the first paint of a 6,000-box graph took 0.69 s while the scan ran; at 0.5 ms it
    # takes 0.18 s (bench/bench_view.py prints the longest UI stall).
    sys.setswitchinterval(0.0005)
    app.setApplicationName("fuseview")
    app.setOrganizationName("fuseview")
    return app


def run_app(
    doc: ModelDocument | None = None,
    path: str | None = None,
    expansion_mode: str = "auto",
    size: tuple[int, int] = (1400, 900),
    end_process: bool = False,
) -> int:
    """Show the window with a loaded document (or open path). Pictures: fuseview.ui.headless.run_workbench,
    which waits for the scan and the onnxruntime check.

    end_process (the command line): once the window has closed, its jobs ended and its settings are
    written, end the process at once instead of tearing down every graph item one by one (~0.5 s).
    """
    from fuseview.ui.main_window import MainWindow

    app = ensure_app()
    win = MainWindow(expansion_mode=expansion_mode)
    win.resize(*size)
    status = {"code": 0}
    restore_signals = end_on_signals(app, win, status)
    win.show()
    if doc is not None:
        win.show_document(doc)
    elif path is not None:
        win.open_file(path)
    code = app.exec()
    restore_signals()
    win.runner.shutdown()
    win.settings.sync()
    code = code or status["code"]
    if end_process:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def end_on_signals(app: QApplication, win, status: dict):
    """SIGTERM (exit 143) and Ctrl-C (130) end the window as Quit does, without asking: jobs cancelled and
    waited for, profile children killed, temp folders removed. Returns what puts the old handlers back.

    Python runs a signal handler only between bytecodes, and Qt's loop runs none while idle: the signal's
    number is written to a socket (signal.set_wakeup_fd) that the loop watches."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    inside, outside = socket.socketpair()
    inside.setblocking(False)
    outside.setblocking(False)
    old_fd = signal.set_wakeup_fd(outside.fileno())
    ending = (signal.SIGTERM, signal.SIGINT)
    old = {sig: signal.signal(sig, lambda *_: None) for sig in ending}  # the loop does the work, below
    notifier = QSocketNotifier(inside.fileno(), QSocketNotifier.Type.Read, app)

    def woke() -> None:
        try:
            got = [b for b in inside.recv(64) if b in ending]
        except BlockingIOError:
            return
        if not got:
            return
        notifier.setEnabled(False)
        for sig in ending:
            signal.signal(sig, signal.SIG_IGN)  # one is enough: let the clean-up finish
        status["code"] = 143 if signal.SIGTERM in got else 130
        win.end_jobs()
        app.exit(status["code"])

    notifier.activated.connect(woke)

    def restore() -> None:
        notifier.setEnabled(False)
        signal.set_wakeup_fd(old_fd)
        for sig, handler in old.items():
            signal.signal(sig, handler)
        inside.close()
        outside.close()

    return restore


def grab_to_png(widget, path: str | os.PathLike) -> None:
    """Save a picture of a widget (the whole window) to a PNG, atomically."""
    from fuseview.ui.export import write_atomic

    out = Path(path)
    pix = widget.grab()

    def write(tmp: str) -> None:
        if not pix.save(tmp, "PNG"):
            raise FuseviewError(f"{out}: cannot write PNG")

    write_atomic(out, write)
