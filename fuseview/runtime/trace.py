"""onnxruntime profiling traces (Chrome-trace JSON): split into runs, per-node times with provider."""

from __future__ import annotations

import bisect
import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from fuseview.errors import FuseviewError
from fuseview.safe_io import read_bytes
from fuseview.textsafe import shorten

_NODE_SUFFIX = "_kernel_time"
CPU_TIME = "cpu"
DEVICE_TIME = "device"  # CUDA kernel time from cat == "Kernel" events (builds with CUDA profiling)
HOST_SIDE = "host-side"  # a CUDA node's own event: launch time on the host, not GPU time
CPU_PROVIDER = "CPUExecutionProvider"


@dataclass(slots=True)
class NodeTime:
    """One node execution in one run: host duration, and device kernel time when the trace has it."""

    name: str
    op_type: str
    provider: str
    host_us: float
    kernel_us: float = 0.0
    kernels: int = 0


@dataclass(slots=True)
class TraceRun:
    """One `model_run` of the session and the node executions inside it."""

    ts: float
    dur_us: float
    nodes: list[NodeTime] = field(default_factory=list)


# onnxruntime writes one event per line, its head fields in this order and layout, args last (in no fixed
# order). The pattern starts with a literal newline so the regex engine can jump from line to line; the
# trailing [^\n]* takes the rest of the line so each match ends where the next one starts.
_ROW = re.compile(
    rb'\n\{"cat" ?: ?"(\w+)", ?"pid" ?: ?-?\d+, ?"tid" ?: ?-?\d+, ?"dur" ?: ?(\d+), ?"ts" ?: ?(\d+),'
    rb' ?"ph" ?: ?"\w+", ?"name" ?: ?"([^"\\\n]*(?:\\.[^"\\\n]*)*)"[^\n]*'
)
_ARGS = re.compile(rb'"(op_name|provider)" ?: ?"([^"\\\n]*(?:\\.[^"\\\n]*)*)"')

# A row: cat, name, ts, dur, args (only op_name and provider are read).
Row = tuple[str | None, str, int, int, dict]
_UNSEEN: tuple[str, str, str] = ("", "", "")  # info.get's default: a node event name not decoded yet


def _text(b: bytes) -> str:
    s = b.decode("utf-8")
    return s if "\\" not in s else json.loads(f'"{s}"')


def _fast_rows(data: bytes) -> list[Row] | None:
    """The events of onnxruntime's one-event-per-line file, reading only the fields fuseview uses.

    json.loads of every event's args (memory and thread statistics) costs more than the profiled runs
    themselves on big graphs. Names and args are decoded once per distinct node (a node's op type and
    provider do not change between runs). None when the file is not in that exact layout: every line
    between the brackets must be one event (the caller then parses it as plain JSON).
    """
    head = data.lstrip()
    if not head.startswith(b"["):
        return None
    rows: list[Row] = []
    texts: dict[bytes, str] = {}
    node_args: dict[bytes, dict] = {}
    empty: dict = {}
    expect = data.find(b"\n")
    if expect < 0 or data[:expect].strip() != b"[":
        return None
    for m in _ROW.finditer(data, expect):
        if m.start() != expect:
            return None  # a line the pattern skipped: not the layout this reader knows
        expect = m.end()
        cat, dur, ts, name = m.groups()
        c = texts.get(cat)
        if c is None:
            c = texts[cat] = _text(cat)
        if c == "Node":
            args = node_args.get(name)
            if args is None:
                line = data[m.end(4):m.end()]
                args = node_args[name] = {k.decode(): _text(v) for k, v in _ARGS.findall(line)}
        else:
            args = empty
        n = texts.get(name)
        if n is None:
            n = texts[name] = _text(name)
        rows.append((c, n, int(ts), int(dur), args))
    if data[expect:].strip() not in (b"]", b",]", b""):
        return None
    return rows


def _dict_rows(events: Iterable[dict]) -> Iterator[Row]:
    for e in events:
        if not isinstance(e, dict):
            raise FuseviewError("malformed onnxruntime profile: an event is not an object")
        ts, dur = e.get("ts", 0), e.get("dur", 0)
        for key, v in (("ts", ts), ("dur", dur)):
            # onnxruntime writes whole numbers; "5" (a string) or a bool is not its event
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise FuseviewError(f"malformed onnxruntime event: its {key} is {shorten(repr(v), 40)},"
                                    " not a time in microseconds")
        args = e.get("args") or {}
        yield (e.get("cat"), str(e.get("name", "")), ts, dur, args if isinstance(args, dict) else {})


def _read_bytes(path: str | os.PathLike) -> bytes:
    if not os.path.lexists(path):
        raise FuseviewError(f"{path}: not a readable onnxruntime profile (no such file)")
    return read_bytes(path, "trace", "onnxruntime profile")  # regular file within the size limit


def _json_events(data: bytes, path: str | os.PathLike) -> list[dict]:
    try:
        events = json.loads(data)
    except ValueError as exc:
        raise FuseviewError(f"{path}: not a readable onnxruntime profile ({exc})") from None
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    if not isinstance(events, list):
        raise FuseviewError(f"{path}: not an onnxruntime profile (no event list)")
    return events


def read_trace(path: str | os.PathLike, fast: bool = True) -> list[dict]:
    """The event list of an onnxruntime profile file (fast path: only the fields fuseview reads)."""
    data = _read_bytes(path)
    rows = _fast_rows(data) if fast else None
    if rows is None:
        return _json_events(data, path)
    return [{"cat": c, "name": n, "ts": ts, "dur": dur, **({"args": a} if c == "Node" else {})}
            for c, n, ts, dur, a in rows]


def read_runs(path: str | os.PathLike) -> tuple[list[TraceRun], bool]:
    """Runs of an onnxruntime profile file and whether it has CUDA kernel events, without event dicts."""
    data = _read_bytes(path)
    fast = _fast_runs(data)
    if fast is None:
        events = _json_events(data, path)
        return split_runs(events), has_kernel_events(events)
    return fast


def _fast_runs(data: bytes) -> tuple[list[TraceRun], bool] | None:
    """split_runs of onnxruntime's one-event-per-line file in one pass over it (None: not that layout)."""
    expect = data.find(b"\n")
    if expect < 0 or data[:expect].strip() != b"[":
        return None
    info: dict[bytes, tuple[str, str, str] | None] = {}  # node event name -> node name, op type, provider
    sessions: list[tuple[int, int]] = []
    nodes: list[NodeTime] = []
    node_ts: list[int] = []
    last: NodeTime | None = None
    kernels = False
    cut = len(_NODE_SUFFIX)
    for m in _ROW.finditer(data, expect):
        start, end = m.span()
        if start != expect:
            return None  # a line the pattern skipped: not the layout this reader knows
        expect = end
        cat, dur, ts, name = m.group(1, 2, 3, 4)
        if cat == b"Node":
            node = info.get(name, _UNSEEN)
            if node is _UNSEEN:
                text = _text(name)
                node = None
                if text.endswith(_NODE_SUFFIX):
                    args = dict(_ARGS.findall(data, m.end(4), end))
                    op, prov = args.get(b"op_name", b"?"), args.get(b"provider", b"?")
                    node = (text[:-cut], _text(op), _text(prov))
                info[name] = node
            if node is not None:
                # Kernel events after a node outside every run land on it and are dropped with it.
                last = NodeTime(node[0], node[1], node[2], float(dur))
                nodes.append(last)
                node_ts.append(int(ts))
        elif cat == b"Session":
            if name == b"model_run":
                sessions.append((int(ts), int(dur)))
        elif cat == b"Kernel":
            kernels = True
            if last is not None:
                last.kernel_us += float(dur)
                last.kernels += 1
    if data[expect:].strip() not in (b"]", b""):
        return None
    sessions.sort()
    runs = [TraceRun(float(ts), float(dur)) for ts, dur in sessions]
    starts = [ts for ts, _ in sessions]
    ends = [ts + dur for ts, dur in sessions]
    for n, ts in zip(nodes, node_ts, strict=True):
        i = bisect.bisect_right(starts, ts) - 1
        if i >= 0 and ts <= ends[i]:
            runs[i].nodes.append(n)
    return runs, kernels


def split_runs(events: list[dict]) -> list[TraceRun]:
    """Runs in time order, each with its node executions; Kernel events go to the node they follow."""
    return _split_rows(list(_dict_rows(events)))


def _split_rows(rows: list[Row]) -> list[TraceRun]:
    runs = sorted(
        (TraceRun(float(ts), float(dur)) for cat, name, ts, dur, _ in rows
         if cat == "Session" and name == "model_run"),
        key=lambda r: r.ts,
    )
    starts = [r.ts for r in runs]
    ends = [r.ts + r.dur_us for r in runs]
    cut = len(_NODE_SUFFIX)
    last: NodeTime | None = None
    for cat, name, ts, dur, args in rows:
        if cat == "Node" and name.endswith(_NODE_SUFFIX):
            last = NodeTime(name[:-cut], str(args.get("op_name", "?")), str(args.get("provider", "?")),
                            float(dur))
            i = bisect.bisect_right(starts, ts) - 1
            if i >= 0 and ts <= ends[i]:
                runs[i].nodes.append(last)
            else:
                last = None  # outside any run (session setup): not counted
        elif cat == "Kernel" and last is not None:
            # Device kernels are listed right after the node that launched them (onnxruntime's format).
            last.kernel_us += float(dur)
            last.kernels += 1
    return runs


def has_kernel_events(events: list[dict]) -> bool:
    """Whether the build wrote CUDA device kernel events."""
    return any(e.get("cat") == "Kernel" for e in events)


def node_time(n: NodeTime, device_events: bool) -> tuple[float, str]:
    """The time to attribute to a node execution, and where it comes from."""
    if n.provider == CPU_PROVIDER:
        return n.host_us, CPU_TIME
    if device_events:
        return n.kernel_us, DEVICE_TIME
    return n.host_us, HOST_SIDE
