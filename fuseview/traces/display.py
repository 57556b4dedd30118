"""What the trace views show of a report's events by default: kernels and ops, not Python frames.

Python-function events (a trace recorded with_stack=True) nest inside each other, so their times add up
to many times the step; they are hidden unless asked for (`--python`, the workspace's toggle). Frames of
fuseview's own capture helper are never shown. Paths in frame names are shown relative to the working
folder when they lie inside it.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, TypeVar

from fuseview.traces.categories import STEP

if TYPE_CHECKING:
    from fuseview.traces.stats import EventStats

Event = TypeVar("Event", "dict", "EventStats")  # a report's event entry, or the typed one (EventStats)

# a Python frame as Kineto names it: `path/to/file.py(123): function`, or a module call
_FRAME = re.compile(r"^(?P<file>[^()]{1,4096}\.py)\((?P<line>\d{1,9})\): (?P<func>\S{1,1024})$")
_MODULE = ("nn.Module: ", "<built-in ")
OWN_CAPTURE = "fuseview/capture/"


def is_python(event: dict | EventStats) -> bool:
    """Whether a report event is a Python function's frame (marked so, or named like one in old reports)."""
    if isinstance(event, dict):
        if "python" in event:
            return bool(event["python"])
        name = event["name"]
    elif event.python:
        return True
    else:
        name = event.name
    return _FRAME.match(name) is not None or name.startswith(_MODULE)


def is_own_capture(name: str) -> bool:
    """Whether an event is a frame of fuseview's own capture helper (never the user's work)."""
    return OWN_CAPTURE in name.replace("\\", "/")


def shown_name(name: str, cwd: str | None = None) -> str:
    """The event name with a frame's absolute path made relative to the working folder (when inside it)."""
    m = _FRAME.match(name)
    if m is None or not os.path.isabs(m.group("file")):
        return name
    base = cwd if cwd is not None else os.getcwd()
    try:
        rel = os.path.relpath(m.group("file"), base)
    except ValueError:  # another drive (Windows)
        return name
    if rel.startswith(".."):
        return name
    return f"{rel}({m.group('line')}): {m.group('func')}"


def shown_events(events: list[Event], python: bool = False) -> list[Event]:
    """The events a view lists: no step marker, no frame of fuseview's capture, Python frames if asked."""
    return [e for e in events if _key(e, "category") != STEP and not is_own_capture(_key(e, "name"))
            and (python or not is_python(e))]


def _key(event: dict | EventStats, key: str) -> str:
    return str(event[key] if isinstance(event, dict) else getattr(event, key))


# how the per-line join (workflows.onnx_join) shares a time among lines: the CLI and the window say it
JOIN_SPLIT = ("a kernel's time is split across its lines by the eager time of each line's ops, a fused"
              " ONNX node's onnxruntime time across its lines by the time of the nodes it replaced"
              " there; no time is counted twice: the lines add up to the totals")
