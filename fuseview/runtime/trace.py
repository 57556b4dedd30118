"""onnxruntime profiling traces (Chrome-trace JSON): split into runs, per-node times with provider."""

from __future__ import annotations

import bisect
import json
import os
import re
from dataclasses import dataclass, field

from fuseview.errors import FuseviewError

_NODE_SUFFIX = "_kernel_time"
CPU_TIME = "cpu"
DEVICE_TIME = "device"  # CUDA kernel time from cat == "Kernel" events (builds with CUDA profiling)
HOST_SIDE = "host-side"  # a CUDA node's own event: launch time on the host, not GPU time


@dataclass
class NodeTime:
    """One node execution in one run: host duration, and device kernel time when the trace has it."""

    name: str
    op_type: str
    provider: str
    host_us: float
    kernel_us: float = 0.0
    kernels: int = 0


@dataclass
class TraceRun:
    """One `model_run` of the session and the node executions inside it."""

    ts: float
    dur_us: float
    nodes: list[NodeTime] = field(default_factory=list)


# onnxruntime writes one event per line, its fields in this order, args last (in no fixed order).
_HEAD = re.compile(
    r'^\{"cat"\s*:\s*"(\w+)"[^\n]*?"dur"\s*:\s*(\d+)\s*,\s*"ts"\s*:\s*(\d+)[^\n]*?"name"\s*:\s*"((?:[^"\\\n]|\\.)*)"',
    re.M,
)
_ARGS = re.compile(r'"(op_name|provider)"\s*:\s*"((?:[^"\\\n]|\\.)*)"')


def _unescape(s: str) -> str:
    return s if "\\" not in s else json.loads(f'"{s}"')


def _fast_events(text: str) -> list[dict] | None:
    """Events of onnxruntime's one-event-per-line file, reading only the fields fuseview uses.

    json.loads of every event's args (memory and thread statistics) costs more than the profiled runs
    themselves on big graphs; a node's op type and provider are read once, from its first event.
    Returns None when the file is not in that layout (the caller then parses it as plain JSON).
    """
    if not text.lstrip().startswith("["):
        return None
    events = []
    node_args: dict[str, dict] = {}
    for m in _HEAD.finditer(text):
        cat, dur, ts, name = m.groups()
        ev = {"cat": cat, "dur": int(dur), "ts": int(ts), "name": _unescape(name)}
        if cat == "Node":
            args = node_args.get(name)
            if args is None:
                end = text.find("\n", m.end())
                found = _ARGS.findall(text, m.end(), end if end >= 0 else len(text))
                args = node_args[name] = {k: _unescape(v) for k, v in found}
            ev["args"] = args
        events.append(ev)
    if len(events) != text.count("\n{") + (1 if text.startswith("{") else 0):
        return None
    return events


def read_trace(path: str | os.PathLike, fast: bool = True) -> list[dict]:
    """The event list of an onnxruntime profile file (fast path: only the fields fuseview reads)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        data = _fast_events(text) if fast else None
        if data is None:
            data = json.loads(text)
    except (OSError, ValueError) as exc:
        raise FuseviewError(f"{path}: not a readable onnxruntime profile ({exc})") from None
    if isinstance(data, dict):
        data = data.get("traceEvents", [])
    if not isinstance(data, list):
        raise FuseviewError(f"{path}: not an onnxruntime profile (no event list)")
    return data


def split_runs(events: list[dict]) -> list[TraceRun]:
    """Runs in time order, each with its node executions; Kernel events go to the node they follow."""
    runs = sorted(
        (
            TraceRun(float(e["ts"]), float(e.get("dur", 0)))
            for e in events
            if e.get("cat") == "Session" and e.get("name") == "model_run"
        ),
        key=lambda r: r.ts,
    )
    starts = [r.ts for r in runs]
    last: NodeTime | None = None
    for e in events:
        cat = e.get("cat")
        if cat == "Node" and str(e.get("name", "")).endswith(_NODE_SUFFIX):
            args = e.get("args") or {}
            ts = float(e.get("ts", 0))
            last = NodeTime(
                name=e["name"][: -len(_NODE_SUFFIX)],
                op_type=str(args.get("op_name", "?")),
                provider=str(args.get("provider", "?")),
                host_us=float(e.get("dur", 0)),
            )
            i = bisect.bisect_right(starts, ts) - 1
            if i >= 0 and ts <= runs[i].ts + runs[i].dur_us:
                runs[i].nodes.append(last)
            else:
                last = None  # outside any run (session setup): not counted
        elif cat == "Kernel" and last is not None:
            # Device kernels are listed right after the node that launched them (onnxruntime's format).
            last.kernel_us += float(e.get("dur", 0))
            last.kernels += 1
    return runs


def has_kernel_events(events: list[dict]) -> bool:
    """Whether the build wrote CUDA device kernel events."""
    return any(e.get("cat") == "Kernel" for e in events)


def node_time(n: NodeTime, device_events: bool) -> tuple[float, str]:
    """The time to attribute to a node execution, and where it comes from."""
    if n.provider == "CPUExecutionProvider":
        return n.host_us, CPU_TIME
    if device_events:
        return n.kernel_us, DEVICE_TIME
    return n.host_us, HOST_SIDE
