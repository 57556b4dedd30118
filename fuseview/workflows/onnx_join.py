"""torch.compile beside ONNX: Inductor's kernels and fuseview's fusions of the same model, per source line.

A capture made with `compare_compile(..., onnx=True)` holds the module exported by the dynamo ONNX exporter
(`model.onnx`), whose nodes carry the Python stack that made them (`pkg.torch.onnx.stack_trace`). Inductor's
provenance gives each kernel its source lines. Joined on (file name, line): per line, the eager ops and
their time, Inductor's kernels and their time, the ONNX nodes there before fuseview's fusions and after
them, and (ort_time) those nodes' onnxruntime time before and after, profiled at the exported shapes.
Lines where one compiler fuses and the other does not come first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from fuseview.progress import StepProgress

STACK_KEY = "pkg.torch.onnx.stack_trace"
SCOPE_KEY = "pkg.torch.onnx.name_scopes"
MODEL = "model.onnx"
_TORCH_FILES = (f"{os.sep}torch{os.sep}", "/torch/")
NO_LINE = "(no source line)"  # the row of ONNX nodes the exporter gave no user frame


@dataclass
class LineRow:
    """One source line: what eager ran there, what each compiler made of it."""

    file: str
    line: int
    code: str = ""
    eager_ops: set[str] = field(default_factory=set)
    eager_us: float = 0.0
    kernels: list[str] = field(default_factory=list)
    kernel_us: float = 0.0
    inductor_fuses: bool = False  # a fused (not extern) kernel made of two or more graph nodes
    onnx_before: list[str] = field(default_factory=list)  # node op types, graph order
    onnx_after: list[str] = field(default_factory=list)  # the same after fuseview's candidates
    fusions: list[str] = field(default_factory=list)  # the candidates (rule: fused op) touching the line
    node_names: list[str] = field(default_factory=list)  # the ONNX nodes of the line (before fusion)
    modules: list[str] = field(default_factory=list)  # their module scopes (e.g. block.mlp.act), graph order
    ort_before_us: float | None = None  # onnxruntime p50 per run of those nodes (--onnx-time)
    ort_after_us: float | None = None  # the same after fuseview's fusions

    @property
    def shown(self) -> bool:
        """Whether the line has anything to show: a kernel, an ONNX node or onnxruntime time."""
        return bool(self.kernels or self.onnx_before or self.ort_after_us)

    @property
    def where(self) -> str:
        """file:line, or the no-source-line row's name."""
        return self.file if self.file == NO_LINE else f"{self.file}:{self.line}"

    @property
    def onnx_fuses(self) -> bool:
        """Whether a fuseview candidate fuses nodes of this line."""
        return bool(self.fusions)

    @property
    def disagree(self) -> bool:
        """One compiler fuses here and the other does not."""
        return self.inductor_fuses != self.onnx_fuses

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"file": self.file, "line": self.line, "code": self.code, "eager_ops": sorted(self.eager_ops),
                "eager_us": self.eager_us, "kernels": self.kernels, "kernel_us": self.kernel_us,
                "inductor_fuses": self.inductor_fuses, "onnx_fuses": self.onnx_fuses,
                "onnx_before": self.onnx_before, "onnx_after": self.onnx_after, "fusions": self.fusions,
                "ort_before_us": self.ort_before_us, "ort_after_us": self.ort_after_us,
                "modules": self.modules}


def stack_frames(text: str) -> list[tuple[str, int, str]]:
    """(file, line, code) of each `File "x.py", line 8, in f` frame of a stack trace (outermost first),
    by splitting; code is the line after the frame's, when it is not another frame."""
    out = []
    lines = text.split("\n")
    for i, ln in enumerate(lines):
        at = ln.find('File "')
        if at < 0:
            continue
        file, sep, rest = ln[at + 6:].partition('", line ')
        num = rest.split(",", 1)[0]
        if sep and num.isdigit() and len(num) < 10:
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            out.append((file, int(num), "" if nxt.startswith('File "') else nxt))
    return out


def user_frames(text: str) -> list[tuple[str, int]]:
    """The frames of a node's stack outside torch itself (the user's own lines), outermost first."""
    return [(f, n) for f, n, _c in stack_frames(text) if not any(t in f for t in _TORCH_FILES)]


def innermost_user_frame(text: str) -> tuple[str, int, str] | None:
    """The innermost frame outside torch: the line that made the node (what Inductor's provenance names)."""
    frames = [fr for fr in stack_frames(text) if not any(t in fr[0] for t in _TORCH_FILES)]
    return frames[-1] if frames else None


def _key(file: str, line: int) -> tuple[str, int]:
    return Path(file).name, line


def node_lines(model: onnx.ModelProto) -> dict[tuple[str, int], list[onnx.NodeProto]]:
    """The main graph's nodes under the user source line that made each (its innermost user frame)."""
    return {k: [n for n, _code in v] for k, v in _node_lines(model).items()}


def module_scope(node: onnx.NodeProto) -> str:
    """The innermost module a dynamo-exported node was made in ('' at the top level): the exporter's
    name scopes end with the node's own name, the module paths come before it."""
    import ast

    meta = {p.key: p.value for p in node.metadata_props}
    try:
        scopes = ast.literal_eval(meta[SCOPE_KEY])  # a Python list literal of strings
    except (KeyError, ValueError, SyntaxError, MemoryError, RecursionError):
        return ""
    if not isinstance(scopes, list):
        return ""
    paths = [s for s in scopes[:-1] if isinstance(s, str) and s]
    return paths[-1] if paths else ""


def _node_lines(model: onnx.ModelProto) -> dict[tuple[str, int], list[tuple[onnx.NodeProto, str]]]:
    out: dict[tuple[str, int], list[tuple[onnx.NodeProto, str]]] = {}
    for n in model.graph.node:
        meta = {p.key: p.value for p in n.metadata_props}
        frame = innermost_user_frame(meta.get(STACK_KEY, ""))
        if frame is not None:
            out.setdefault(_key(frame[0], frame[1]), []).append((n, frame[2]))
    return out


def _kernel_lines(k: dict[str, Any]) -> list[tuple[tuple[str, int], str, float, set[str]]]:
    """(line key, code, share of the kernel, eager ops) of each line a kernel came from: its part of the
    replaced eager time (the report's provenance lines), else an even split over its source lines."""
    p = k["provenance"]
    parts: dict[tuple[str, int], tuple[float, str, set[str]]] = {}
    for ln in p.get("lines") or []:
        key = _key(ln["file"], ln["line"])
        us, code, ops = parts.get(key, (0.0, ln.get("code", ""), set()))
        parts[key] = (us + ln["replaced_us"], code, ops | set(ln.get("ops", [])))
    for s in p["source"]:
        parts.setdefault(_key(s["file"], s["line"]), (0.0, s.get("code", ""), set()))
    total = sum(us for us, _c, _o in parts.values())
    return [(key, code, us / total if total else 1 / len(parts), ops)
            for key, (us, code, ops) in parts.items()]


def _add_kernels(rows: dict[tuple[str, int], LineRow], report: dict[str, Any]) -> None:
    """Each kernel split across its lines by the eager time of each line's ops (every µs counted once)."""
    for k in (report.get("diff") or {}).get("fused_kernels") or []:
        p = k.get("provenance")
        if not p:
            continue
        name = p["kernel"] if k["kind"] == "extern" else k["name"]
        for key, code, share, ops in _kernel_lines(k):
            r = rows.setdefault(key, LineRow(key[0], key[1]))
            r.code = r.code or code
            r.kernels.append(name)
            r.kernel_us += k["time_us"] * share
            r.eager_ops.update(ops)
            r.eager_us += k["replaced_us"] * share
            # fused: two or more graph nodes in one kernel; extern: a pattern rewritten into one call (SDPA)
            r.inductor_fuses |= ((k["kind"] == "fused" and len(p["post_grad"]) >= 2)
                                 or bool(p.get("region_pre_grad")))


def join(report: dict[str, Any], model: onnx.ModelProto, candidates: list[Any]) -> list[LineRow]:
    """Per source line, Inductor's kernels (from a report's provenance) beside the ONNX nodes and the
    fuseview candidates applied together (Candidate objects of a scan of model, no two overlapping) there;
    disagreements first. A kernel's time is split across its lines (no line gets another's time)."""
    rows: dict[tuple[str, int], LineRow] = {}
    _add_kernels(rows, report)
    by_line = _node_lines(model)
    framed = {n.name for pairs in by_line.values() for n, _c in pairs}
    loose = [(n, "") for n in model.graph.node if n.name not in framed]
    if loose:
        by_line[(NO_LINE, 0)] = loose
    owner = {n: c for c in candidates for n in c.nodes}
    for key, pairs in by_line.items():
        nodes = [n for n, _code in pairs]
        r = rows.setdefault(key, LineRow(key[0], key[1]))
        r.code = r.code or next((code for _n, code in pairs if code), "")
        r.onnx_before = [n.op_type for n in nodes]
        r.node_names = [n.name for n in nodes]
        r.modules = list(dict.fromkeys(m for m in map(module_scope, nodes) if m))
        seen: set[str] = set()
        for n in nodes:
            c = owner.get(n.name)
            if c is None:
                r.onnx_after.append(n.op_type)
            elif c.id not in seen:
                seen.add(c.id)
                r.onnx_after.append(c.fused_op.split(":")[-1])
                r.fusions.append(f"{c.rule}: {c.fused_op} of {len(c.nodes)} nodes")
    return sorted(rows.values(), key=lambda r: (not r.disagree, -r.eager_us, r.file, r.line))


def applied(found: Any) -> list[Any]:
    """The candidates fuseview.fuse applies together (accept-all: first come first served among
    conflicts), so a line never lists two fusions of the same nodes."""
    from fuseview.fusion.plan import Plan

    plan = Plan(found.candidates, "")
    ids = set(plan.accept_all())
    return [c for c in found.candidates if c.id in ids]


def capture_join(folder: str | os.PathLike[str], report: dict[str, Any], ort_time: bool = False,
                 runs: int = 20, progress: StepProgress | None = None) -> list[LineRow] | None:
    """The join for a capture folder holding model.onnx (None when it holds none); ort_time also profiles
    the model and its fused version (every candidate) in onnxruntime at the exported shapes (progress:
    the profile's (stage, done, total); a job's progress stops it when cancelled)."""
    path = Path(folder) / MODEL
    if not path.is_file():
        return None
    from fuseview.fusion.pipeline import FuseOptions, dims_for, load_for_fusion, scan_for_fusion

    model = load_for_fusion(path)
    found = scan_for_fusion(model, dims_for(model, FuseOptions(validate=False)), path)  # exported shapes
    rows = join(report, model, applied(found))
    if ort_time:
        add_ort_times(path, rows, runs, progress, (model, found))
    return rows


def add_ort_times(path: Path, rows: list[LineRow], runs: int,
                  progress: StepProgress | None = None,
                  scanned: tuple[onnx.ModelProto, Any] | None = None) -> tuple[float, float]:
    """Each line's onnxruntime time (p50 per run) before and after fusion: the model fused with all its
    candidates (what fuseview.fuse does), both profiled on the same inputs. A fused node covering several
    lines is split across them by the time of each line's own nodes it replaced (split_fused), so the
    lines add up to each model's time. Returns (original, fused) summed node time, p50 per run.
    `scanned`: the (model, scan) capture_join already made of path, else it is loaded and scanned here.

    The fuse pipeline and the profile target directly, not fuseview.api: the API reads captures through
    the session's traces pipeline, which calls this."""
    import tempfile

    from fuseview.fusion.pipeline import FuseOptions, build_fused, dims_for, load_for_fusion, scan_for_fusion
    from fuseview.graph.save import save_model_atomic
    from fuseview.provenance import ORIGIN_KEY, origin_names
    from fuseview.runtime.job import ProfileRequest
    from fuseview.targets import open_target

    opts = FuseOptions(validate=False)
    if scanned is None:
        model = load_for_fusion(path)
        found = scan_for_fusion(model, dims_for(model, opts), path)
    else:
        model, found = scanned
    fused = build_fused(model, found, [c.id for c in applied(found)], opts, str(path.parent)).model
    with tempfile.TemporaryDirectory(prefix="fuseview-join-") as tmp:
        other = save_model_atomic(fused, Path(tmp) / "fused.onnx", base_dir=path.parent)
        request = ProfileRequest(model=path, against=other, runs=runs)
        rep = open_target("local", request.provider).profile(request, progress)
    before, after = ({n["name"]: n["p50_us"] for n in m["nodes"]} for m in rep["models"][:2])
    origins = {}
    for n in fused.graph.node:
        meta = {p.key: p.value for p in n.metadata_props}
        origins[n.name] = set(origin_names(meta.get(ORIGIN_KEY)) or [n.name])
    split_fused(rows, before, after, origins)
    return sum(before.values()), sum(after.values())


def split_fused(rows: list[LineRow], before: dict[str, float], after: dict[str, float],
                origins: dict[str, set[str]]) -> None:
    """Set each line's onnxruntime time before (its own nodes) and after fusion: a fused node's time goes
    to the lines of the nodes it replaced, in proportion to those nodes' time before fusion (evenly by
    node when they took none); a node whose origins are on no line goes to the no-source-line row."""
    line_of = {n: r for r in rows for n in r.node_names}
    for r in rows:
        if r.node_names:
            r.ort_before_us = sum(before.get(n, 0.0) for n in r.node_names)
            r.ort_after_us = 0.0
    for name, us in after.items():
        mine = [o for o in sorted(origins.get(name, {name})) if o in line_of]
        if not mine:
            loose = next((x for x in rows if x.file == NO_LINE), None)
            if loose is None:
                loose = LineRow(NO_LINE, 0, ort_before_us=0.0, ort_after_us=0.0)
                rows.append(loose)
            loose.ort_after_us = (loose.ort_after_us or 0.0) + us
            continue
        weights = [before.get(o, 0.0) for o in mine]
        total = sum(weights)
        for o, w in zip(mine, weights, strict=True):
            r = line_of[o]
            r.ort_after_us = (r.ort_after_us or 0.0) + us * (w / total if total else 1 / len(mine))
