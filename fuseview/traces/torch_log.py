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
MAX_PAYLOAD = 64 << 20  # one kept payload
MAX_LOG_FILES = 64
_HEADER = re.compile(rb"^[VIWEC]\d{4} [\d:.]+ +\d+ [^\]]*\] (\{.*\})\s*$")
# the names the generated code gives its kernels in the profiler (cpp.enable_kernel_profile)
_RECORD_NAME = re.compile(r'"(graph_\d+_((?:cpp|triton)_\w+?))"')
_STACK_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\n(?P<code>[^\n]*)')


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
    post_grad_code: str = ""
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
    """The compiled graphs of a TORCH_TRACE folder, in the order they were compiled."""

    path: str
    graphs: list[CompiledGraph]
    files: list[str]

    def by_key(self) -> dict[str, CompiledGraph]:
        """Graphs keyed by "frame_id/frame_compile_id"."""
        return {g.key: g for g in self.graphs}

    def by_profiler_name(self) -> dict[str, tuple[CompiledGraph, str]]:
        """graph_N_cpp_fused_..._K (the profiler's name) -> (its graph, the kernel's own name)."""
        return {p: (g, k) for g in self.graphs for p, k in g.profiler_names.items()}


def _bad(path, line_no: int, why: str) -> FuseviewError:
    return FuseviewError(f"{path}: line {line_no}: not a readable TORCH_TRACE log ({why})")


def _log_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".log" and not p.name.startswith("."))
        if not files:
            raise FuseviewError(f"{path}: no TORCH_TRACE log (*.log) in this folder")
        if len(files) > MAX_LOG_FILES:
            raise FuseviewError(f"{path}: {len(files)} log files; fuseview reads at most {MAX_LOG_FILES}")
        return files
    if not path.exists():
        raise FuseviewError(f"{path}: TORCH_TRACE folder not found")
    return [path]


def _records(path: Path):
    """(line number, header dict, payload text or None) for each record; payloads of unwanted ones skipped."""
    check_regular(path, "trace", "TORCH_TRACE log")
    cap = limit("trace")
    read = 0
    header: dict | None = None
    start = 0
    payload: list[bytes] | None = None
    size = 0
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise FuseviewError(f"{path}: cannot read ({exc.strerror})") from None
    with f:
        line_no = 0
        while True:
            raw = f.readline(MAX_LINE + 1)
            line_no += 1
            read += len(raw)
            if read > cap:
                raise FuseviewError(f"{path}: grew past the size limit while being read")
            if len(raw) > MAX_LINE:
                raise _bad(path, line_no, "a line longer than 16 MiB")
            if raw.startswith(b"\t"):
                if header is None:
                    raise _bad(path, line_no, "a payload line without a record before it")
                if payload is not None:
                    size += len(raw)
                    if size > MAX_PAYLOAD:
                        raise _bad(path, line_no, "a payload over 64 MiB")
                    payload.append(raw[1:].rstrip(b"\n"))
                continue
            if header is not None:
                yield start, header, _finish(path, start, header, payload)
                header = None
            if not raw:
                return
            if not raw.strip():
                continue
            m = _HEADER.match(raw)
            if m is None:
                raise _bad(path, line_no, "neither a record header nor a payload line")
            try:
                header = json.loads(m.group(1))
            except ValueError:
                raise _bad(path, line_no, "a record header that is not JSON") from None
            if not isinstance(header, dict):
                raise _bad(path, line_no, "a record header that is not an object")
            start = line_no
            payload = [] if "has_payload" in header and _kind(header) in _WANTED else None
            size = 0


def _kind(header: dict) -> str | None:
    art = header.get("artifact")
    if isinstance(art, dict):
        name = art.get("name")
        return name if isinstance(name, str) else None
    if OUTPUT_CODE in header:
        return OUTPUT_CODE
    return None


def _finish(path, line_no: int, header: dict, payload: list[bytes] | None) -> str | None:
    if payload is None:
        return None
    data = b"\n".join(payload)
    want = header.get("has_payload")
    if isinstance(want, str) and hashlib.md5(data, usedforsecurity=False).hexdigest() != want:
        raise _bad(path, line_no, "a payload that does not match its md5 (cut or edited)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(path, line_no, "a payload that is not UTF-8") from None


def _json_payload(path, line_no: int, text: str) -> dict:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise _bad(path, line_no, "a provenance payload that is not JSON") from None
    if not isinstance(value, dict):
        raise _bad(path, line_no, "a provenance payload that is not an object")
    return value


def _str_lists(path, line_no: int, d, what: str) -> dict[str, list[str]]:
    if not isinstance(d, dict):
        raise _bad(path, line_no, f"{what} is not an object")
    out = {}
    for k, v in d.items():
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise _bad(path, line_no, f"{what}[{k!r}] is not a list of names")
        out[str(k)] = v
    return out


def parse_stack(text: str) -> list[SourceLine]:
    """The frames of one formatted stack (`File "x.py", line 8, in f` then the code line)."""
    return [SourceLine(m["file"], int(m["line"]), m["func"], m["code"].strip())
            for m in _STACK_FRAME.finditer(text)]


def _apply(path, g: CompiledGraph, line_no: int, kind: str, text: str) -> None:
    if kind in PRE_GRAD:
        g.pre_grad.update(fx_code.parse_graph(text))
    elif kind == POST_GRAD:
        g.post_grad = fx_code.parse_graph(text)
        g.post_grad_code = text
    elif kind == OUTPUT_CODE:
        for m in _RECORD_NAME.finditer(text):
            g.profiler_names[m.group(1)] = m.group(2)
    elif kind == NODE_MAPPINGS:
        d = _json_payload(path, line_no, text)
        g.post_to_pre = _str_lists(path, line_no, d.get("postToPre", {}), "postToPre")
        g.kernel_to_post = _str_lists(path, line_no, d.get("cppCodeToPost", {}), "cppCodeToPost")
        # GPU graphs name their Triton kernels under their own key (the same shape)
        for key in ("tritonCodeToPost", "kernelToPost"):
            if key in d:
                g.kernel_to_post.update(_str_lists(path, line_no, d[key], key))
    elif kind == KERNEL_STACKS:
        d = _str_lists(path, line_no, _json_payload(path, line_no, text), "kernel stack traces")
        g.stacks = {k: [frames for s in v if (frames := parse_stack(s))] for k, v in d.items()}


def read_compile_log(path: str | os.PathLike) -> CompileLog:
    """The compiled graphs, with their provenance, of a TORCH_TRACE folder (or one of its log files)."""
    p = Path(path)
    files = _log_files(p)
    graphs: dict[str, CompiledGraph] = {}
    attempts: dict[str, object] = {}
    owner: dict[str, Path] = {}
    register_inputs(files)  # a report written in this run never lands on the log it read
    for f in files:
        for line_no, header, text in _records(f):
            fid, cid = header.get("frame_id"), header.get("frame_compile_id")
            if text is None or not isinstance(fid, int) or not isinstance(cid, int):
                continue
            key = f"{fid}/{cid}"
            if owner.setdefault(key, f) != f:
                raise FuseviewError(f"{p}: two processes' logs both compiled graph {key}; pass one log file")
            # a frame whose first attempt hit a graph break restarts: only the last attempt counts
            if attempts.get(key) != header.get("attempt"):
                attempts[key] = header.get("attempt")
                graphs[key] = CompiledGraph(key)
            _apply(f, graphs[key], line_no, _kind(header) or "", text)
    if not graphs:
        raise FuseviewError(f"{p}: the TORCH_TRACE log has no compiled graph (nothing was compiled?)")
    if not any(g.has_provenance for g in graphs.values()):
        raise FuseviewError(f"{p}: no provenance in the TORCH_TRACE log (compile with torch._inductor"
                            ".config.trace.provenance_tracking_level = 1, without a cache hit)")
    return CompileLog(str(p), list(graphs.values()), [str(f) for f in files])


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
