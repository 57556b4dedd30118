"""Read a Chrome-trace JSON file incrementally into compact per-event arrays.

The traceEvents array is decoded one event at a time with json's raw_decode over a sliding text window,
so a 100 MB trace never exists as a list of dicts. onnxruntime's profile (a top-level array of Session and
Node events) is handed to fuseview.runtime.trace, which already knows that format.
"""

from __future__ import annotations

import codecs
import itertools
import json
import os
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from fuseview.errors import FuseviewError
from fuseview.runtime.trace import node_time, read_runs
from fuseview.safe_io import check_regular

PYTORCH = "pytorch"
ONNXRUNTIME = "onnxruntime"
CHUNK = 4 << 20
_SPACE = re.compile(r"[\s,]*")
_KEY = re.compile(r'"traceEvents"\s*:\s*\[')
_ONNX_MAGIC = (b"\x08", b"\x0a")  # ONNX protobuf files start with field 1 (ir_version) or a graph field


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
    # onnxruntime: (start, duration) of each model_run, read from the Session events
    runs: list[tuple[float, float]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts)


class _Interner:
    def __init__(self, out: list[str]):
        self.ids: dict = {}
        self.out = out

    def __call__(self, key) -> int:
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.out)
            self.out.append(key if isinstance(key, str) else str(key))
        return i


def _bad(path, why: str) -> FuseviewError:
    return FuseviewError(f"{path}: not a readable profiler trace ({why})")


class _Window:
    """A sliding window of decoded text over a file read in chunks."""

    def __init__(self, f, path):
        self.f = f
        self.path = path
        self.dec = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.pos = 0
        self.eof = False
        self.bare = False

    def more(self) -> bool:
        if self.eof:
            return False
        data = self.f.read(CHUNK)
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
            w.pos = m.end()
            return False
        # keep a tail so a key split across chunks is still found
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
            except ValueError:
                batch = None
            if batch is not None:
                w.pos = cut
                yield batch
                continue
        try:
            ev, end = decode(w.text, w.pos)
        except json.JSONDecodeError:
            # most often an event cut by the end of the window: read on and retry
            if not w.more():
                raise _bad(w.path, "truncated or malformed event") from None
            continue
        w.pos = end
        yield [ev]


def _check_tail(w: _Window) -> None:
    """The rest of the file after the event list must close the JSON document (else it was cut)."""
    while w.more():
        if len(w.text) - w.pos > (64 << 20):
            raise _bad(w.path, "more than 64 MB after the event list")
    tail = w.text[w.pos:]
    opener = '[' if w.bare else '{"traceEvents":['
    try:
        json.loads(opener + tail)
    except ValueError:
        raise _bad(w.path, "truncated or malformed after the event list") from None


def _looks_like_onnx(path) -> bool:
    return Path(path).suffix.lower() == ".onnx"


def read_trace(path: str | os.PathLike) -> RawTrace:
    """The complete events of a torch.profiler or onnxruntime trace (FuseviewError when it is not one)."""
    p = Path(path)
    if not p.exists():
        raise FuseviewError(f"{path}: file not found")
    check_regular(p, "trace", "profiler trace")  # no FIFO or device, and within FUSEVIEW_MAX_TRACE_BYTES
    if _looks_like_onnx(p):
        raise FuseviewError(f"{path}: an ONNX model, not a profiler trace (open it with `fuseview open`)")
    try:
        f = open(p, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise FuseviewError(f"{path}: cannot read ({exc.strerror})") from None
    with f:
        w = _Window(f, path)
        bare = w.bare = _skip_to_events(w)
        batches = _events(w)
        first: list = next(batches, [])
        if bare and first and isinstance(first[0], dict) and first[0].get("cat") in ("Session", "Node"):
            return _read_onnxruntime(p)
        raw = RawTrace(str(path), PYTORCH)
        _collect(raw, first, batches, path)
    if len(raw) == 0:
        raise _bad(path, "no timed events")
    return raw


def _collect(raw: RawTrace, first: list, batches, path) -> None:
    name_of = _Interner(raw.names)
    cat_of = _Interner(raw.cats)
    threads: dict = {}
    add_name, add_cat, add_thread = raw.name_id.append, raw.cat_id.append, raw.thread.append
    add_ts, add_dur, add_corr = raw.ts.append, raw.dur.append, raw.corr.append
    for batch in itertools.chain((first,), batches):
        for ev in batch:
            try:
                ph = ev.get("ph")
            except AttributeError:
                raise _bad(path, "an event is not an object") from None
            if ph == "X":
                try:
                    ts = float(ev["ts"])
                    dur = float(ev.get("dur", 0.0))
                except (KeyError, TypeError, ValueError):
                    raise _bad(path, "an event without a numeric ts/dur") from None
                key = (ev.get("pid"), ev.get("tid"))
                t = threads.get(key)
                if t is None:
                    t = threads[key] = len(threads)
                add_name(name_of(ev.get("name", "")))
                add_cat(cat_of(ev.get("cat") or ""))
                add_thread(t)
                add_ts(ts)
                add_dur(dur)
                args = ev.get("args")
                c = args.get("correlation", -1) if isinstance(args, dict) else -1
                add_corr(c if isinstance(c, int) and not isinstance(c, bool) else -1)
            elif ph in ("s", "f", "t"):
                raw.flows += 1


def _read_onnxruntime(p: Path) -> RawTrace:
    runs, kernels = read_runs(p)
    raw = RawTrace(str(p), ONNXRUNTIME)
    name_of = _Interner(raw.names)
    cat_of = _Interner(raw.cats)
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
