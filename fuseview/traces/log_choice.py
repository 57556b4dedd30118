"""Pick, among a TORCH_TRACE folder's logs, the one the compiled trace was recorded beside.

torch writes one `dedicated_log_torch_trace_*.log` per process (and per handler: each run, each compile
worker, each rank), all into the folder TORCH_TRACE names, so a folder reused for two runs holds both.
A log fits the compiled trace when it holds compiled graphs with provenance, was written by the trace's
process (the profiler's `pid`, when a log of that process is there: a container may reuse pids across
runs, so the clock decides between those), and by the clocks (the profiler's `baseTimeNanoseconds` + `ts`
against the log's record headers, local time as torch writes them): its first record is before the trace
ended, and no other such log started after it ended (that one is the later run). Anything else is
ignored with its reason; no log, or more than one, that fits is refused, naming them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fuseview.errors import FuseviewError

SLACK_S = 0.05  # header clocks have millisecond steps; the profiler's and the log's clocks agree to ms


def clock_seconds(clock: bytes | None, near: float) -> float | None:
    """A header clock `MMDD HH:MM:SS.ffffff` (local time, no year) in seconds since the epoch, in the year
    that puts it nearest to `near`; None when it is not a date."""
    if clock is None:
        return None
    try:
        day, hms = clock.decode("ascii").split(" ")
        h, m, s = hms.split(":")
        month, mday, sec = int(day[:2]), int(day[2:]), float(s)
        year = time.localtime(near).tm_year
        best = None
        for y in (year - 1, year, year + 1):
            t = time.mktime((y, month, mday, int(h), int(m), int(sec), 0, 0, -1)) + sec % 1
            if best is None or abs(t - near) < abs(best - near):
                best = t
    except (ValueError, OverflowError, OSError):
        return None
    if not 1 <= month <= 12 or not 1 <= mday <= 31:
        return None
    return best


def _hms(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def _fits_graphs(log) -> str | None:
    if not log.graphs:
        return "no compiled graph in it (a compile worker's or an uncompiled run's log)"
    if not any(g.has_provenance for g in log.graphs):
        return "no provenance in it (compiled without trace.provenance_tracking_level = 1, or a cache hit)"
    return None


def _refuse_all(where: str, logs: list) -> FuseviewError:
    if not any(lg.graphs for lg in logs):
        return FuseviewError(f"{where}: the TORCH_TRACE log has no compiled graph (nothing was compiled?)")
    return FuseviewError(f"{where}: no provenance in the TORCH_TRACE log (compile with torch._inductor"
                         ".config.trace.provenance_tracking_level = 1, without a cache hit)")


def choose(where: str, logs: list, after=None) -> tuple:
    """(the LogFile that fits the compiled trace `after` (a RawTrace, or None), [(other log, why)])."""
    ignored: list[tuple[str, str]] = []
    cands = []
    for lg in logs:
        why = _fits_graphs(lg)
        if why is None:
            cands.append(lg)
        else:
            ignored.append((lg.path, why))
    if not cands:
        raise _refuse_all(where, logs)
    if len(logs) == 1:
        return cands[0], ignored
    pids = after.pids() if after is not None else frozenset()
    same = [lg for lg in cands if lg.pids & pids]
    if same:
        for lg in cands:
            if lg not in same:
                ignored.append((lg.path, f"written by process {', '.join(map(str, sorted(lg.pids)))}, not the"
                                         f" compiled trace's ({', '.join(map(str, sorted(pids)))})"))
        cands = same
    # the clock decides only between several logs (a pass over every event of the trace)
    span = after.wall_span() if after is not None and len(cands) > 1 else None
    if span is not None:
        cands = _by_clock(cands, span, ignored)
    if len(cands) == 1:
        return cands[0], ignored
    names = ", ".join(Path(lg.path).name for lg in cands)
    if not cands:
        whys = "; ".join(f"{Path(f).name}: {w}" for f, w in ignored)
        raise FuseviewError(f"{where}: no TORCH_TRACE log fits the compiled trace ({whys})")
    how = ("by process and clock" if span is not None else
           "and the compiled trace has no baseTimeNanoseconds to tell them apart by clock")
    raise FuseviewError(f"{where}: {len(cands)} TORCH_TRACE logs fit the compiled trace {how}"
                        f" ({names}); pass one log file")


def _by_clock(cands: list, span: tuple[float, float], ignored: list) -> list:
    """The logs that fit the trace's wall-clock span; the others added to ignored with why."""
    start, end = span
    timed: list[tuple[Any, float | None, float | None]] = []
    for lg in cands:
        first, last = clock_seconds(lg.first, end), clock_seconds(lg.last, end)
        if first is None or last is None:
            timed.append((lg, None, None))  # no clock to place it by: it stays a candidate
        elif first > end + SLACK_S:
            ignored.append((lg.path, f"a later run: its first record ({_hms(first)}) is after the compiled"
                                     f" trace ended ({_hms(end)})"))
        else:
            timed.append((lg, first, last))
    placed = [(lg, f, la) for lg, f, la in timed if f is not None]
    if not placed:
        return [lg for lg, _f, _la in timed]
    latest = max(f for _lg, f, _la in placed if f is not None)
    keep = []
    for lg, first, last in timed:
        if first is not None and last is not None and last < latest - SLACK_S:
            ignored.append((lg.path, f"an earlier run: its records ({_hms(first)}-{_hms(last)}) end before"
                                     f" the latest run's log began ({_hms(latest)})"))
        else:
            keep.append(lg)
    return keep
