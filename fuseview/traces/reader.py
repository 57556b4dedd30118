"""Read a Chrome-trace JSON file incrementally into compact per-event arrays.

The traceEvents array is decoded one event at a time with json's raw_decode over a sliding text window,
so a 100 MB trace never exists as a list of dicts. onnxruntime's profile (a top-level array of Session and
Node events) is read the same way and split into runs by fuseview.runtime.trace.

Every trace is hostile until checked: only the bytes the file had when it was opened are read (a file that
grows is refused, not followed), one event may take at most MAX_EVENT_CHARS of text, names and categories
are strings, pid/tid numbers or strings, ts/dur finite numbers and dur not negative; at most MAX_EVENTS
timed events and MAX_NAMES distinct names (memory stays near 200 bytes per event whatever the file holds).
"""

from __future__ import annotations

import codecs
import itertools
import json
import math
import os
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from fuseview.errors import FuseviewError
from fuseview.runtime.trace import node_time, split_runs
from fuseview.safe_io import check_regular
from fuseview.textsafe import shorten

PYTORCH = "pytorch"
ONNXRUNTIME = "onnxruntime"
CHUNK = 4 << 20
MAX_EVENT_CHARS = 16 << 20  # one event's JSON text; a longer one is malformed (or a NUL-byte flood)
MAX_EVENTS = 5_000_000  # timed events (about 1.5 GB of Kineto JSON)
MAX_NAMES = 200_000  # distinct event names (a real profile has a few thousand)
MAX_THREADS = 100_000
MAX_TIME_US = 1e18  # |ts| and dur: Kineto's epoch microseconds are near 2e15
_SPACE = re.compile(r"[\s,]*")
_KEY = re.compile(r'"traceEvents"\s*:\s*\[')


@dataclass
class RawTrace:
    """The complete ("X") events of one trace, as parallel arrays, plus the names they refer to."""

    path: str
    source: str
    names: list[str] = field(default_factory=list)  # name id -> event name
    cats: list[str] = field(default_factory=list)  # cat id -> event category (as written)
    name_id: array = field(default_factory=lambda: array("i"))
    cat_id: array = field(default_factory=lambda: array("i"))
    thread: array = field(default_factory=lambda: array("i"))  # id of (pid, tid)
    ts: array = field(default_factory=lambda: array("d"))
    dur: array = field(default_factory=lambda: array("d"))
    # args.correlation: links a launch (cudaLaunchKernel) to the device kernel it started; -1 when absent
    corr: array = field(default_factory=lambda: array("q"))
    flows: int = 0  # flow events (ph s/f/t, e.g. ac2g): counted, not timed
    # ac2g flows (launch -> device kernel): their id, "s"/"f", thread and ts, to link events without args
    flow_id: array = field(default_factory=lambda: array("q"))
    flow_end: array = field(default_factory=lambda: array("b"))  # 1 for the "f" (kernel) side
    flow_thread: array = field(default_factory=lambda: array("i"))
    flow_ts: array = field(default_factory=lambda: array("d"))
    # onnxruntime: (start, duration) of each model_run, read from the Session events
    runs: list[tuple[float, float]] = field(default_factory=list)
    threads: list = field(default_factory=list)  # thread id -> its (pid, tid) as text
    # Kineto's baseTimeNanoseconds: the wall clock (ns since the epoch) of ts 0, when the trace says it
    base_ns: int | None = None

    def pids(self) -> frozenset[int]:
        """The process ids of the trace's threads."""
        out = set()
        for key in self.threads:  # "(14941, 14941)"
            pid = key[1:].split(",", 1)[0]
            if pid.isdigit() and len(pid) < 19:
                out.add(int(pid))
        return frozenset(out)

    def wall_span(self) -> tuple[float, float] | None:
        """(first start, last end) of the trace's events in seconds since the epoch, when it has a base."""
        if self.base_ns is None or not len(self.ts):
            return None
        ends = (t + d for t, d in zip(self.ts, self.dur, strict=True))
        return self.base_ns / 1e9 + min(self.ts) / 1e6, self.base_ns / 1e9 + max(ends) / 1e6

    def __len__(self) -> int:
        return len(self.ts)


class _Interner:
    def __init__(self, out: list[str], path, what: str = "names", most: int = MAX_NAMES):
        self.ids: dict = {}
        self.out = out
        self.path, self.what, self.most = path, what, most

    def __call__(self, key) -> int:
        i = self.ids.get(key)
        if i is None:
            if len(self.out) >= self.most:
                raise _bad(self.path, f"more than {self.most} distinct event {self.what}")
            i = self.ids[key] = len(self.out)
            self.out.append(key if isinstance(key, str) else str(key))
        return i


def _bad(path, why: str) -> FuseviewError:
    return FuseviewError(f"{path}: not a readable profiler trace ({why})")


class _Window:
    """A sliding window of decoded text over a file read in chunks, never past the size it had when opened."""

    def __init__(self, f, path, size: int):
        self.f = f
        self.path = path
        self.dec = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.pos = 0
        self.eof = False
        self.bare = False
        self.left = size  # bytes still to read
        self.head_base: int | None = None  # baseTimeNanoseconds, once seen

    def more(self) -> bool:
        if self.eof:
            return False
        try:
            data = self.f.read(min(CHUNK, self.left)) if self.left > 0 else b""
            if not data and self.f.read(1):  # a writer is still appending: refuse, don't follow it
                raise _bad(self.path, "the file grew while being read")
        except OSError as exc:
            raise _bad(self.path, f"cannot read: {exc.strerror or exc}") from None
        self.left -= len(data)
        try:
            s = self.dec.decode(data, final=not data)
        except UnicodeDecodeError:
            raise _bad(self.path, "not UTF-8 text") from None
        self.text = self.text[self.pos:] + s
        self.pos = 0
        self.eof = not data
        return True


def _skip_to_events(w: _Window) -> bool:
    """Position after the '[' that opens the event list; True when the file is a bare array."""
    while len(w.text) < 64 and w.more():
        pass
    head = w.text.lstrip()
    if head.startswith("["):
        w.pos = w.text.index("[") + 1
        return True
    if not head.startswith("{"):
        raise _bad(w.path, "not JSON")
    while True:
        m = _KEY.search(w.text, max(0, w.pos))
        if m:
            w.head_base = w.head_base or _base_ns(w.text, max(0, w.pos), m.start())
            w.pos = m.end()
            return False
        # keep a tail so a key split across chunks is still found
        w.head_base = w.head_base or _base_ns(w.text, max(0, w.pos))
        w.pos = max(0, len(w.text) - 32)
        if not w.more():
            raise _bad(w.path, "no traceEvents list")


_NEXT = re.compile(r"\s*,\s*\{")
_BATCH_MIN = 1 << 16


def _boundary(text: str, lo: int) -> int | None:
    """The end of the last complete-looking event in text[lo:]: a '}' followed by ', {'."""
    hi = len(text)
    for _ in range(64):
        i = text.rfind("}", lo, hi)
        if i < 0:
            return None
        if _NEXT.match(text, i + 1):
            return i + 1
        hi = i
    return None


def _events(w: _Window):
    """Lists of decoded events: most of each window in one json.loads, one raw_decode where that fails."""
    decode = json.JSONDecoder().raw_decode
    loads = json.loads
    space = _SPACE.match
    while True:
        gap = space(w.text, w.pos)
        w.pos = gap.end() if gap is not None else w.pos
        if w.pos >= len(w.text):
            if not w.more():
                raise _bad(w.path, "truncated: the event list never ends")
            continue
        if w.text[w.pos] == "]":
            _check_tail(w)
            return
        cut = _boundary(w.text, w.pos) if len(w.text) - w.pos > _BATCH_MIN else None
        if cut is not None:
            try:
                # a "}, {" inside an event's args would make a bad cut: then the slow path below
                batch = loads("[" + w.text[w.pos:cut] + "]")
            except (ValueError, RecursionError):
                batch = None
            if batch is not None:
                w.pos = cut
                yield batch
                continue
        try:
            ev, end = decode(w.text, w.pos)
        except json.JSONDecodeError:
            # most often an event cut by the end of the window: read on and retry, up to one event's size
            if len(w.text) - w.pos > MAX_EVENT_CHARS:
                raise _bad(w.path, f"malformed, or one event over {MAX_EVENT_CHARS >> 20} MiB") from None
            if not w.more():
                raise _bad(w.path, "truncated or malformed event") from None
            continue
        except RecursionError:
            raise _bad(w.path, "an event nested too deeply") from None
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            raise _bad(w.path, f"malformed event: {shorten(str(exc), 80)}") from None
        w.pos = end
        yield [ev]


def _check_tail(w: _Window) -> None:
    """The rest of the file after the event list must close the JSON document (else it was cut)."""
    while w.more():
        if len(w.text) - w.pos > (64 << 20):
            raise _bad(w.path, "more than 64 MiB after the event list")
    tail = w.text[w.pos:]
    opener = '[' if w.bare else '{"traceEvents":['
    try:
        doc = json.loads(opener + tail)
    except ValueError:
        raise _bad(w.path, "truncated or malformed after the event list") from None
    base = doc.get("baseTimeNanoseconds") if isinstance(doc, dict) else None
    if isinstance(base, int) and not isinstance(base, bool) and 0 < base < (1 << 63):
        w.head_base = base


_BASE = re.compile(r'"baseTimeNanoseconds"\s{0,16}:\s{0,16}(\d{1,19})[\s,}]')


def _base_ns(text: str, start: int = 0, end: int | None = None) -> int | None:
    """baseTimeNanoseconds from the text before the event list (Kineto writes it there or after)."""
    m = _BASE.search(text, start, len(text) if end is None else end)
    return int(m.group(1)) if m and int(m.group(1)) < (1 << 63) else None


def _looks_like_onnx(path) -> bool:
    return Path(path).suffix.lower() == ".onnx"


def read_trace(path: str | os.PathLike) -> RawTrace:
    """The complete events of a torch.profiler or onnxruntime trace (FuseviewError when it is not one)."""
    p = Path(path)
    # a regular file (no FIFO, device, or overlong name) within FUSEVIEW_MAX_TRACE_BYTES
    st = check_regular(p, "trace", "profiler trace")
    if _looks_like_onnx(p):
        raise FuseviewError(f"{path}: an ONNX model, not a profiler trace (open it with `fuseview open`)")
    try:
        f = open(p, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise FuseviewError(f"{path}: cannot read ({exc.strerror})") from None
    with f:
        w = _Window(f, path, st.st_size)
        bare = w.bare = _skip_to_events(w)
        batches = _events(w)
        first: list = next(batches, [])
        if bare and first and isinstance(first[0], dict) and first[0].get("cat") in ("Session", "Node"):
            return _read_onnxruntime(p, first, batches)
        raw = RawTrace(str(path), PYTORCH)
        _collect(raw, first, batches, path)
        raw.base_ns = w.head_base
    if len(raw) == 0:
        raise _bad(path, "no timed events")
    return raw


def _text_field(ev: dict, key: str, path) -> str:
    v = ev.get(key)
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    raise _bad(path, f"an event's {key} is a {type(v).__name__}, not a string")


def _time_field(ev: dict, key: str, path) -> float:
    v = ev.get(key, 0.0)
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise _bad(path, f"an event's {key} is a {type(v).__name__}, not numeric")
    try:
        x = float(v)
    except (ValueError, OverflowError):
        raise _bad(path, f"an event's {key} is not numeric ({shorten(str(v), 40)})") from None
    if not math.isfinite(x) or abs(x) > MAX_TIME_US:
        raise _bad(path, f"an event's {key} is {shorten(str(v), 40)}, not a finite time")
    if key == "dur" and x < 0:
        raise _bad(path, f"an event's dur is negative ({shorten(str(v), 40)})")
    return x


def _thread_key(ev: dict, path) -> tuple:
    key = (ev.get("pid"), ev.get("tid"))
    for v in key:
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, str, float))):
            raise _bad(path, f"an event's pid or tid is a {type(v).__name__}")
    return key


def _correlation(args) -> int:
    c = args.get("correlation", -1) if isinstance(args, dict) else -1
    return c if isinstance(c, int) and not isinstance(c, bool) and 0 <= c < (1 << 63) else -1


def _collect(raw: RawTrace, first: list, batches, path) -> None:
    name_of = _Interner(raw.names, path)
    cat_of = _Interner(raw.cats, path, "categories")
    thread_of = _Interner(raw.threads, path, "threads", MAX_THREADS)
    add_name, add_cat, add_thread = raw.name_id.append, raw.cat_id.append, raw.thread.append
    add_ts, add_dur, add_corr = raw.ts.append, raw.dur.append, raw.corr.append
    for batch in itertools.chain((first,), batches):
        for ev in batch:
            if not isinstance(ev, dict):
                raise _bad(path, "an event is not an object")
            ph = ev.get("ph")
            if ph == "X":
                if "ts" not in ev:
                    raise _bad(path, "an event without a numeric ts/dur")
                ts = _time_field(ev, "ts", path)
                dur = _time_field(ev, "dur", path)
                add_thread(thread_of(_thread_key(ev, path)))
                add_name(name_of(_text_field(ev, "name", path)))
                add_cat(cat_of(_text_field(ev, "cat", path)))
                add_ts(ts)
                add_dur(dur)
                add_corr(_correlation(ev.get("args")))
                if len(raw.ts) > MAX_EVENTS:
                    raise _bad(path, f"more than {MAX_EVENTS} timed events")
            elif ph in ("s", "f", "t"):
                raw.flows += 1
                fid = ev.get("id")
                if ev.get("cat") == "ac2g" and isinstance(fid, int) and not isinstance(fid, bool) \
                        and 0 <= fid < (1 << 63):
                    t = thread_of(_thread_key(ev, path))
                    if len(raw.flow_id) >= MAX_EVENTS:
                        raise _bad(path, f"more than {MAX_EVENTS} flow events")
                    if "ts" not in ev:
                        raise _bad(path, "a flow event without a numeric ts")
                    raw.flow_ts.append(_time_field(ev, "ts", path))
                    raw.flow_id.append(fid)
                    raw.flow_end.append(ph == "f")
                    raw.flow_thread.append(t)
    _link_flows(raw)


def _link_flows(raw: RawTrace) -> None:
    """Give a launch and its kernel that lack args.correlation the id of the ac2g flow that joins them."""
    if not any(raw.flow_end) or min(raw.corr, default=0) >= 0:
        return
    # Kineto puts each end of the flow at the start of the event it binds to, on that event's thread
    at = {(t, ts): fid for t, ts, fid in zip(raw.flow_thread, raw.flow_ts, raw.flow_id, strict=True)}
    for i, c in enumerate(raw.corr):
        if c < 0:
            fid = at.get((raw.thread[i], raw.ts[i]))
            if fid is not None:
                raw.corr[i] = fid


_ORT_CATS = ("Session", "Node", "Kernel")


def _ort_events(first: list, batches, path, seen: dict):
    """onnxruntime's events, checked, as the small dicts split_runs reads (seen["kernel"]: any Kernel)."""
    args_of: dict[tuple, dict] = {}  # one args dict per (op_name, provider): a node repeats every run
    names: dict[str, str] = {}
    count = 0
    for batch in itertools.chain((first,), batches):
        for ev in batch:
            if not isinstance(ev, dict):
                raise _bad(path, "an event is not an object")
            cat = _text_field(ev, "cat", path)
            if cat not in _ORT_CATS:
                continue
            count += 1
            if count > MAX_EVENTS:
                raise _bad(path, f"more than {MAX_EVENTS} timed events")
            name = _text_field(ev, "name", path)
            name = names.setdefault(name, name) if len(names) < MAX_NAMES else name  # one copy per name
            for time_key in ("ts", "dur"):  # onnxruntime writes whole numbers: a string is not its event
                if isinstance(ev.get(time_key), str):
                    text = shorten(ev[time_key], 40)
                    raise _bad(path, f"an onnxruntime event's {time_key} is a string ({text!r}): malformed")
            ts, dur = _time_field(ev, "ts", path), _time_field(ev, "dur", path)
            args = ev.get("args") or {}
            if not isinstance(args, dict):
                raise _bad(path, "an event's args is not an object")
            key = (_text_field(args, "op_name", path) or "?", _text_field(args, "provider", path) or "?")
            a = args_of.get(key)
            if a is None:
                if len(args_of) >= MAX_NAMES:
                    raise _bad(path, f"more than {MAX_NAMES} distinct node kinds")
                a = args_of[key] = {"op_name": key[0], "provider": key[1]}
            if cat == "Kernel":
                seen["kernel"] = True
            yield {"cat": cat, "name": name, "ts": ts, "dur": dur, "args": a}


def _read_onnxruntime(p: Path, first: list, batches) -> RawTrace:
    seen = {"kernel": False}
    runs = split_runs(_ort_events(first, batches, p, seen))
    kernels = seen["kernel"]
    raw = RawTrace(str(p), ONNXRUNTIME)
    name_of = _Interner(raw.names, p)
    cat_of = _Interner(raw.cats, p, "categories")
    node_cat = cat_of("Node")
    for run in runs:
        raw.runs.append((run.ts, run.dur_us))
        t = run.ts
        for n in run.nodes:
            us, _ = node_time(n, kernels)
            raw.name_id.append(name_of(n.name))
            raw.cat_id.append(node_cat)
            raw.thread.append(0)
            # nodes run one after another; the runtime parser keeps their order, not their start
            raw.ts.append(t)
            raw.dur.append(us)
            raw.corr.append(-1)
            t += us
    if not runs:
        raise _bad(p, "an onnxruntime profile without any model_run")
    return raw
