"""The trace workspace window from the CLI: `fuseview trace ... --window/--screenshot` and `fuseview open
CAPTURE_DIR` (the checks before Qt starts, then ui.trace_window)."""

from __future__ import annotations

import os


def run_window(paths: list[str], steps: int | None, provenance: str | None, screenshot: str | None,
               size: tuple[int, int] | None, tab: str | None) -> int:
    """The trace workspace window on paths; with screenshot, a picture of it (tab) and exit."""
    from fuseview.qt_libs import check_display, check_qt_libraries, check_qt_platform, has_display
    from fuseview.workflows.traces import resolve_traces

    resolve_traces(paths, steps, provenance)  # a bad folder or trace: one line, before any window
    if screenshot:
        if not has_display():
            os.environ["QT_QPA_PLATFORM"] = "offscreen"  # a picture needs no display
        check_qt_libraries("--screenshot")
    else:
        check_display()
        check_qt_platform()
    from fuseview.ui.trace_window import run_trace_window

    return run_trace_window(paths, steps, provenance, screenshot, size, tab)
