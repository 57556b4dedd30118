"""Read torch's structured compile log (a TORCH_TRACE folder) for Inductor's provenance, bounded.

Each record is one header line, `V1203 05:33:45.815000 8739 torch/_inductor/compile_fx.py:1404] {json}`,
whose JSON names the compiled frame (`frame_id`, `frame_compile_id`, `attempt`) and, with `has_payload`
(the payload's md5), is followed by its payload as tab-indented lines. Only the records fuseview uses are
kept (pre- and post-grad graphs, the generated code's profiler names, the provenance artifacts); every
other payload is skipped line by line without being stored. A cut or edited payload fails its md5.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from fuseview.atomic import register_inputs
from fuseview.errors import FuseviewError
from fuseview.safe_io import check_regular, limit
from fuseview.traces import fx_code

NODE_MAPPINGS = "inductor_provenance_tracking_node_mappings"
KERNEL_STACKS = "inductor_provenance_tracking_kernel_stack_traces"
PRE_GRAD = ("before_pre_grad_graph", "after_pre_grad_graph")
POST_GRAD = "inductor_post_grad_graph"
OUTPUT_CODE = "inductor_output_code"
_WANTED = {NODE_MAPPINGS, KERNEL_STACKS, *PRE_GRAD, POST_GRAD, OUTPUT_CODE}
MAX_LINE = 16 << 20  # one header or payload line
MAX_PAYLOAD = 64 << 20  # one kept payload (its lines without their tabs, joined by newlines)
MAX_JSON_PAYLOAD = 32 << 20  # one provenance (JSON) payload, the only kind held whole before parsing
BLOCK = 4 << 20  # read this much at a time: a run of payload lines is one C-speed step, not a line each
_RUN_END = re.compile(rb"\n[^\t]")  # the end of a run of payload lines (the next line has no tab)
_BLANK_RUN = re.compile(rb"(?:[ \r\f\v]*\n)+")  # blank lines between records
_BLANK_TEXT = re.compile(r"\n\s*\n")  # blank payload lines: one says what many say to the FX parser
MAX_LOG_FILES = 64
LEVELS = b"VIWEC"
_DIGITS = frozenset(b"0123456789")
_CLOCK = frozenset(b"0123456789:.")
_GRAPH_KINDS = {*PRE_GRAD, POST_GRAD}
_JSON_KINDS = {NODE_MAPPINGS, KERNEL_STACKS}


@dataclass(frozen=True)
class SourceLine:
    """One frame of the user's code a kernel came from."""

    file: str
    line: int
    func: str
    code: str

    def to_json(self) -> dict:
        """JSON-ready dict (the report's provenance.source entry)."""
        return {"file": self.file, "line": self.line, "func": self.func, "code": self.code}


@dataclass
class CompiledGraph:
    """One compiled FX graph: its nodes before and after grad passes, its kernels and their provenance."""

    key: str  # "frame_id/frame_compile_id", as in the profiler's "Torch-Compiled Region: 0/0"
    pre_grad: dict[str, fx_code.FxNode] = field(default_factory=dict)
    post_grad: dict[str, fx_code.FxNode] = field(default_factory=dict)
    post_grad_graph: fx_code.GraphParser | None = None  # what the window draws (nodes, inputs, outputs)
    post_to_pre: dict[str, list[str]] = field(default_factory=dict)
    kernel_to_post: dict[str, list[str]] = field(default_factory=dict)  # "cpp_fused_x_0:2" -> nodes
    # same keys as kernel_to_post: each of the kernel's stacks, outermost frame first
    stacks: dict[str, list[list[SourceLine]]] = field(default_factory=dict)
    profiler_names: dict[str, str] = field(default_factory=dict)  # graph_0_cpp_fused_x_0 -> cpp_fused_x_0

    @property
    def has_provenance(self) -> bool:
        """Whether Inductor logged this graph's kernel-to-node mappings."""
        return bool(self.kernel_to_post)

    def kernel_keys(self, kernel: str) -> list[str]:
        """The mapping keys (with their `:debug_handle`) of a kernel name within this graph."""
        return [k for k in self.kernel_to_post if k.rsplit(":", 1)[0] == kernel]


@dataclass
class CompileLog:
    """The compiled graphs of one TORCH_TRACE log (the one picked from its folder), in compile order."""

    path: str
    graphs: list[CompiledGraph]
    files: list[str]  # every log file looked at
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (log file, why it was not used)

    def choice_json(self) -> dict:
        """The report's provenance_choice: the log used and each one ignored, with why."""
        return {"used": self.path, "ignored": [{"log": f, "why": w} for f, w in self.ignored]}

    def by_key(self) -> dict[str, CompiledGraph]:
        """Graphs keyed by "frame_id/frame_compile_id"."""
        return {g.key: g for g in self.graphs}

    def by_profiler_name(self) -> dict[str, tuple[CompiledGraph, str]]:
        """graph_N_cpp_fused_..._K (the profiler's name) -> (its graph, the kernel's own name)."""
        return {p: (g, k) for g in self.graphs for p, k in g.profiler_names.items()}


def _bad(path, line_no: int, why: str) -> FuseviewError:
    return FuseviewError(f"{path}: line {line_no}: not a readable TORCH_TRACE log ({why})")


def log_files(path: Path) -> list[Path]:
    """The log files of a TORCH_TRACE folder (sorted), or the one file given (a regular file)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FuseviewError(f"{path}: TORCH_TRACE folder not found") from None
    except OSError as exc:  # a name too long, a loop of links, no permission
        raise FuseviewError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None
    if stat.S_ISDIR(st.st_mode):
        try:
            files = sorted(p for p in path.iterdir() if p.suffix == ".log" and not p.name.startswith("."))
        except OSError as exc:
            raise FuseviewError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None
        if not files:
            raise FuseviewError(f"{path}: no TORCH_TRACE log (*.log) in this folder")
        if len(files) > MAX_LOG_FILES:
            raise FuseviewError(f"{path}: {len(files)} log files; fuseview reads at most {MAX_LOG_FILES}")
        return files
    if not stat.S_ISREG(st.st_mode) or _pseudo_file(path):
        raise FuseviewError(f"{path}: not a regular file (a TORCH_TRACE log is a file torch wrote)")
    return [path]


def _pseudo_file(path: Path) -> bool:
    """Whether a file is the kernel's (/proc, /sys): stat calls them regular, reading them is not."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return False
    return real.startswith(("/proc/", "/sys/", "/dev/"))


def parse_header(raw: bytes) -> tuple[bytes, int, bytes] | None:
    """(clock `MMDD HH:MM:SS.ffffff`, process id, JSON text) of a record header line, else None."""
    close = raw.find(b"]")
    if close < 1 or raw[0] not in LEVELS:
        return None
    fields = raw[1:close].split(None, 3)
    if len(fields) < 3:
        return None
    day, clock, pid = fields[:3]
    if len(day) != 4 or not set(day) <= _DIGITS or not set(clock) <= _CLOCK or not set(pid) <= _DIGITS \
            or len(pid) > 12:
        return None
    body = raw[close + 1:].strip()
    if not (body.startswith(b"{") and body.endswith(b"}")):
        return None
    return day + b" " + clock, int(pid), body


def _profiler_names(line: str, out: dict[str, str]) -> None:
    """The kernel names the generated code records in the profiler (`"graph_0_cpp_fused_x_0"`)."""
    if "graph_" not in line:
        return
    for piece in line.split('"')[1:-1]:
        if piece.startswith("graph_") and len(out) < fx_code.MAX_NODES:
            num, _, kernel = piece[len("graph_"):].partition("_")
            if num.isdigit() and kernel.startswith(("cpp_", "triton_")) and kernel.isidentifier() \
                    and kernel not in ("cpp_", "triton_"):
                out[piece] = kernel


class _Payload:
    """One kept record's payload, read a line at a time: its md5, and what its kind keeps of it."""

    def __init__(self, path, line_no: int, kind: str, md5) -> None:
        self.path, self.line_no, self.kind = path, line_no, kind
        self.want = md5 if isinstance(md5, str) else None
        self.md5 = hashlib.md5(usedforsecurity=False)
        self.lines = 0
        self.graph = fx_code.GraphParser() if kind in _GRAPH_KINDS else None
        self.chunks: list[bytes] = []
        self.size = 0
        self.names: dict[str, str] = {}

    def add(self, line_no: int, data: bytes, count: int = 1) -> None:
        """`count` payload lines (without their tabs, joined by newlines) from line `line_no` on."""
        sep = b"\n" if self.lines else b""
        self.size += len(sep) + len(data)
        bound = MAX_JSON_PAYLOAD if self.kind in _JSON_KINDS else MAX_PAYLOAD
        if self.size > bound:
            what = "provenance payload" if self.kind in _JSON_KINDS else "payload"
            raise _bad(self.path, line_no, f"a {what} over {bound >> 20} MiB")
        self.md5.update(sep)
        self.md5.update(data)
        self.lines += count
        if self.kind in _JSON_KINDS:
            self.chunks.append(data)
            return
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            at = line_no + data.count(b"\n", 0, exc.start)
            raise _bad(self.path, at, "a payload that is not UTF-8") from None
        if self.graph is not None:
            for line in _BLANK_TEXT.sub("\n\n", text).split("\n"):
                self.graph.feed(line)
        elif "graph_" in text:
            for line in text.split("\n"):
                _profiler_names(line, self.names)

    def check(self) -> None:
        """FuseviewError when the payload does not match its md5 (cut or edited)."""
        if self.want is not None and self.md5.hexdigest() != self.want:
            raise _bad(self.path, self.line_no, "a payload that does not match its md5 (cut or edited)")

    def json(self) -> dict:
        """The payload as a JSON object."""
        data = b"\n".join(self.chunks)
        self.chunks = []
        try:
            value = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError):
            raise _bad(self.path, self.line_no, "a provenance payload that is not JSON") from None
        if not isinstance(value, dict):
            raise _bad(self.path, self.line_no, "a provenance payload that is not an object")
        return value


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass
class LogFile:
    """One log file: its compiled graphs, the processes that wrote it, its first and last record clocks."""

    path: str
    graphs: list[CompiledGraph]
    pids: frozenset[int]
    first: bytes | None  # header clock (`MMDD HH:MM:SS.ffffff`, local time) of the first record
    last: bytes | None


class _Reader:
    """Reads one log file record by record, keeping each compiled graph's kept payloads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.graphs: dict[str, CompiledGraph] = {}
        self.attempts: dict[str, object] = {}
        self.pids: set[int] = set()
        self.first: bytes | None = None
        self.last: bytes | None = None

    def header(self, line_no: int, raw: bytes) -> tuple[CompiledGraph, _Payload] | None:
        """The graph and payload collector a header line opens (None when its payload is not kept)."""
        parsed = parse_header(raw)
        if parsed is None:
            raise _bad(self.path, line_no, "neither a record header nor a payload line")
        clock, pid, body = parsed
        try:
            header = json.loads(body)
        except (ValueError, RecursionError):
            raise _bad(self.path, line_no, "a record header that is not JSON") from None
        if not isinstance(header, dict):
            raise _bad(self.path, line_no, "a record header that is not an object")
        self.first = self.first or clock
        self.last = clock
        if len(self.pids) < MAX_LOG_FILES:
            self.pids.add(pid)
        kind = _kind(header)
        fid, cid = _int(header.get("frame_id")), _int(header.get("frame_compile_id"))
        if "has_payload" not in header or kind not in _WANTED or fid is None or cid is None:
            return None
        key = f"{fid}/{cid}"
        attempt = header.get("attempt")
        # a frame whose first attempt hit a graph break restarts: only the last attempt counts
        if key not in self.graphs or self.attempts[key] != attempt:
            self.attempts[key] = attempt
            self.graphs[key] = CompiledGraph(key)
        return self.graphs[key], _Payload(self.path, line_no, kind, header.get("has_payload"))

    def read(self) -> LogFile:
        """Every record of the file."""
        check_regular(self.path, "trace", "TORCH_TRACE log")
        cap = limit("trace")
        self.open_record: tuple[CompiledGraph, _Payload] | None = None
        self.in_record = False
        read, line_no, carry = 0, 1, b""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise FuseviewError(f"{self.path}: cannot read ({exc.strerror})") from None
        with f:
            while True:
                try:
                    chunk = f.read(BLOCK)
                except OSError as exc:
                    raise FuseviewError(f"{self.path}: cannot read ({exc.strerror})") from None
                read += len(chunk)
                if read > cap:
                    raise FuseviewError(f"{self.path}: grew past the size limit while being read")
                data = carry + chunk if chunk else (carry + b"\n" if carry else b"")
                end = data.rfind(b"\n") + 1
                if end:
                    line_no = self._lines(data, end, line_no)
                carry = data[end:]
                if len(carry) > MAX_LINE:
                    raise _bad(self.path, line_no, "a line longer than 16 MiB")
                if not chunk:
                    break
        if self.open_record is not None:
            _apply(self.path, *self.open_record)
        return LogFile(str(self.path), list(self.graphs.values()), frozenset(self.pids),
                       self.first, self.last)

    def _lines(self, data: bytes, end: int, line_no: int) -> int:
        """The whole lines of data[:end] (from line `line_no`); the number of the line after them."""
        i = 0
        while i < end:
            if data[i] == 9:  # a tab: a run of payload lines, taken whole
                m = _RUN_END.search(data, i, end)
                j = m.start() + 1 if m else end
                count = data.count(b"\n", i, j)
                if not self.in_record:
                    raise _bad(self.path, line_no, "a payload line without a record before it")
                if j - i > MAX_LINE:
                    self._check_lengths(data[i:j], line_no)
                if self.open_record is not None:
                    self.open_record[1].add(line_no, data[i + 1:j - 1].replace(b"\n\t", b"\n"), count)
                i, line_no = j, line_no + count
                continue
            if self.open_record is not None:
                _apply(self.path, *self.open_record)
                self.open_record = None
            blank = _BLANK_RUN.match(data, i, end)
            if blank is not None:
                line_no += data.count(b"\n", i, blank.end())
                i = blank.end()
                continue
            nl = data.index(b"\n", i, end) + 1
            if nl - i > MAX_LINE:
                raise _bad(self.path, line_no, "a line longer than 16 MiB")
            raw = data[i:nl]
            if raw.strip():
                self.open_record = self.header(line_no, raw)
                self.in_record = True
            i, line_no = nl, line_no + 1
        return line_no

    def _check_lengths(self, run: bytes, line_no: int) -> None:
        for k, line in enumerate(run.split(b"\n")):
            if len(line) + 1 > MAX_LINE:
                raise _bad(self.path, line_no + k, "a line longer than 16 MiB")


def _kind(header: dict) -> str | None:
    art = header.get("artifact")
    if isinstance(art, dict):
        name = art.get("name")
        return name if isinstance(name, str) else None
    if OUTPUT_CODE in header:
        return OUTPUT_CODE
    return None


def _str_lists(path, line_no: int, d, what: str) -> dict[str, list[str]]:
    if not isinstance(d, dict):
        raise _bad(path, line_no, f"{what} is not an object")
    out = {}
    for k, v in d.items():
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise _bad(path, line_no, f"{what}[{k!r}] is not a list of names")
        out[str(k)] = v
    return out


def _frame(line: str, code: str) -> SourceLine | None:
    at = line.find('File "')
    if at < 0:
        return None
    file, sep, rest = line[at + len('File "'):].partition('", line ')
    num, sep2, func = rest.partition(", in ")
    if not (sep and sep2 and file and func) or '"' in file or not num.isdigit() or len(num) > 9 \
            or func != func.strip() or len(func.split()) != 1:
        return None
    return SourceLine(file, int(num), func, code.strip())


def parse_stack(text: str) -> list[SourceLine]:
    """The frames of one formatted stack (`File "x.py", line 8, in f` then the code line)."""
    lines = text.split("\n")
    return [f for i in range(len(lines) - 1) if (f := _frame(lines[i], lines[i + 1])) is not None]


def _apply(path, g: CompiledGraph, p: _Payload) -> None:
    p.check()
    line_no, kind = p.line_no, p.kind
    if p.graph is not None:
        if kind in PRE_GRAD:
            g.pre_grad.update(p.graph.nodes)
        else:
            g.post_grad = p.graph.nodes
            g.post_grad_graph = p.graph
    elif kind == OUTPUT_CODE:
        g.profiler_names.update(p.names)
    elif kind == NODE_MAPPINGS:
        d = p.json()
        g.post_to_pre = _str_lists(path, line_no, d.get("postToPre", {}), "postToPre")
        g.kernel_to_post = _str_lists(path, line_no, d.get("cppCodeToPost", {}), "cppCodeToPost")
        # GPU graphs name their Triton kernels under their own key (the same shape)
        for key in ("tritonCodeToPost", "kernelToPost"):
            if key in d:
                g.kernel_to_post.update(_str_lists(path, line_no, d[key], key))
    elif kind == KERNEL_STACKS:
        d = _str_lists(path, line_no, p.json(), "kernel stack traces")
        g.stacks = {k: [frames for s in v if (frames := parse_stack(s))] for k, v in d.items()}


def read_log_file(path: str | os.PathLike) -> LogFile:
    """One TORCH_TRACE log file, read in one pass: its graphs apart from any other file's."""
    return _Reader(Path(path)).read()


def read_compile_log(path: str | os.PathLike, after=None) -> CompileLog:
    """The compiled graphs, with their provenance, of a TORCH_TRACE folder (or one of its log files).

    A folder may hold several logs (runs, processes, compile workers, ranks): each is read apart and the
    one the compiled trace `after` (TraceStats or RawTrace) was recorded beside is picked by its process
    id and clock (fuseview.traces.log_choice); FuseviewError when none or more than one fits."""
    from fuseview.traces.log_choice import choose

    p = Path(path)
    files = log_files(p)
    register_inputs(files)  # a report written in this run never lands on the log it read
    logs = [read_log_file(f) for f in files]
    used, ignored = choose(str(p), logs, getattr(after, "raw", after))
    return CompileLog(used.path, used.graphs, [str(f) for f in files], ignored)


EAGER, COMPILED, LOG_DIR = "eager.json", "compiled.json", "torch_trace"


def resolve_inputs(before: str, after: str | None,
                   provenance: str | None) -> tuple[str, str | None, str | None]:
    """(before, after, provenance folder) as given; a compare_compile folder stands for all three."""
    b = Path(before)
    if not b.is_dir():
        return before, after, provenance
    if after is not None:
        raise FuseviewError(f"{before}: a capture folder stands for both traces; give no AFTER trace")
    missing = [n for n in (EAGER, COMPILED) if not (b / n).is_file()]
    if missing:
        raise FuseviewError(f"{before}: a folder, but not a capture (no {' or '.join(missing)}; fuseview"
                            ".capture.compare_compile writes eager.json, compiled.json, torch_trace/)")
    log = b / LOG_DIR
    register_inputs([b / EAGER, b / COMPILED])
    return str(b / EAGER), str(b / COMPILED), provenance or (str(log) if log.is_dir() else None)
