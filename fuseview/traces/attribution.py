"""Exact attribution of compiled kernels by Inductor's provenance, joined with the profiler's timings.

profiler kernel `graph_0_cpp_fused_gelu_view_1` -> its compiled graph (the generated code that records
that name) -> the kernel's post-grad nodes (cppCodeToPost) -> their pre-grad nodes (postToPre) -> the
eager ops those nodes are (aten::gelu) and the user's source lines. The eager ops are then found in the
eager trace by op type and, when it was recorded with_stack=True, by the Python function they ran in.
On a GPU the Triton kernel's device event is tied to its launch by `correlation` (what ac2g flow events
draw), and the launch to its graph by the enclosing `Torch-Compiled Region: frame/compile` event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fuseview.stats import compare_timings
from fuseview.traces.categories import COMPILED, DEVICE_CATS, OP
from fuseview.traces.resampling import bootstrap_resamples
from fuseview.traces.stats import TraceStats
from fuseview.traces.torch_log import CompiledGraph, CompileLog, SourceLine

REGION = re.compile(r"^Torch-Compiled Region: (\d+/\d+)")
PY_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>\S+)$")
_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<func>.+)_at_\d+$")
EXTERN = "extern_kernels."
_FALLBACK = re.compile(r"^torch\.ops\.(?P<ns>\w+)\.(?P<op>\w+)(?:\.\w+)?$")
FUSED, EXTERN_KIND = "fused", "extern"


@dataclass(frozen=True)
class KernelProvenance:
    """One compiled kernel attributed by provenance: where it came from and what it replaced, per step."""

    name: str  # as the profiler names it (graph_0_cpp_fused_x_0, triton_poi_fused_x_0, extern_kernels.mm)
    kind: str  # FUSED or EXTERN_KIND
    graph: str  # "frame_id/frame_compile_id"
    key: str  # the provenance key, with its debug handle (cpp_fused_x_0:2)
    post_grad: tuple[str, ...]
    post_grad_aten: tuple[str, ...]
    pre_grad: tuple[str, ...]  # named by the kernel's provenance
    aten: tuple[str, ...]  # the eager op types looked up in the eager trace
    source: tuple[SourceLine, ...]  # the lines that made the kernel's nodes (innermost frames)
    stack: tuple[SourceLine, ...]  # every frame of the stacks that reached them, outermost first
    matched_before: tuple[str, ...]
    kernel_steps: tuple[float, ...]  # µs per step
    replaced_steps: tuple[float, ...]
    replaced_from: str  # "host" or "device"
    region_pre_grad: tuple[str, ...] = ()  # unnamed nodes of its graph that it rewrote (region_claims)
    region_aten: tuple[str, ...] = ()  # their eager op types
    # (file, line, code, eager time over all steps, eager ops) of the replaced ops' pre-grad nodes' lines
    lines: tuple[tuple[str, int, str, float, tuple[str, ...]], ...] = ()

    @cached_property
    def time_us(self) -> float:
        """Median time per step."""
        return float(np.median(self.kernel_steps)) if self.kernel_steps else 0.0

    @cached_property
    def replaced_us(self) -> float:
        """Median time per step of the eager ops it replaced."""
        return float(np.median(self.replaced_steps)) if self.replaced_steps else 0.0

    def to_json(self) -> dict:
        """The report's (schema 2) fused_kernels entry."""
        ops = sorted({a.split("::", 1)[-1] for a in self.aten})
        out = {"name": self.name, "fused_ops": ops, "matched_before": list(self.matched_before),
               "time_us": self.time_us, "replaced_us": self.replaced_us,
               "replaced_from": self.replaced_from, "attribution": "provenance", "kind": self.kind,
               "provenance": {"graph": self.graph, "kernel": self.key, "post_grad": list(self.post_grad),
                              "post_grad_aten": list(self.post_grad_aten), "pre_grad": list(self.pre_grad),
                              "aten": list(self.aten), "source": [s.to_json() for s in self.source],
                              "stack": [s.to_json() for s in self.stack],
                              "region_pre_grad": list(self.region_pre_grad),
                              "region_aten": list(self.region_aten), "lines": self._lines_json()},
               "per_step": {"kernel_us": _spread(self.kernel_steps),
                            "replaced_us": _spread(self.replaced_steps)}}
        if len(self.kernel_steps) >= 2 and len(self.replaced_steps) >= 2 and self.replaced_us > 0:
            n = max(len(self.replaced_steps), len(self.kernel_steps))
            est = compare_timings(np.asarray(self.replaced_steps), np.asarray(self.kernel_steps),
                                  paired=False, resamples=bootstrap_resamples(n))
            out["speedup"] = est.to_json() | {"summary": est.summary()}
        return out

    def _lines_json(self) -> list[dict]:
        """Each line's part of replaced_us (its eager ops' share of the replaced time; they sum to it)."""
        total = sum(x[3] for x in self.lines)
        return [{"file": f, "line": n, "code": c, "ops": list(ops),
                 "replaced_us": self.replaced_us * us / total if total else 0.0}
                for f, n, c, us, ops in self.lines]


def _spread(v) -> dict:
    a = np.asarray(v, dtype=np.float64)
    if not len(a):
        return {"p50": 0.0, "min": 0.0, "max": 0.0}
    return {"p50": float(np.median(a)), "min": float(a.min()), "max": float(a.max())}


def nearest_ancestor(mask: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per event, the nearest of itself and its ancestors where mask is set (-1 if none); vectorised."""
    out = np.where(mask, np.arange(len(mask)), -1)
    up = parent.copy()
    pending = np.nonzero((out < 0) & (up >= 0))[0]
    while len(pending):  # one round per nesting level
        q = up[pending]
        hit = mask[q]
        out[pending[hit]] = q[hit]
        up[pending] = np.where(hit, -1, parent[q])
        pending = pending[~hit & (up[pending] >= 0)]
    return out


def step_of(stats: TraceStats, ts: np.ndarray) -> np.ndarray:
    """The counted step each timestamp falls in (0-based; -1 before the first)."""
    if not stats.step_starts:
        return np.zeros(len(ts), dtype=np.int64)
    return np.searchsorted(np.asarray(stats.step_starts), ts, side="right") - 1


class _Trace:
    """Arrays and cached walks over one trace's events."""

    def __init__(self, stats: TraceStats):
        self.stats = stats
        raw = stats.raw
        self.name_id = np.frombuffer(raw.name_id, dtype=np.int32)
        self.cat_id = np.frombuffer(raw.cat_id, dtype=np.int32)
        self.ts = np.frombuffer(raw.ts, dtype=np.float64)
        self.dur = np.frombuffer(raw.dur, dtype=np.float64)
        self.corr = np.frombuffer(raw.corr, dtype=np.int64)
        self.parent = stats.parent
        cat_of = {e.name: e.category for e in stats.events}
        self.is_op = np.array([cat_of.get(n) == OP for n in raw.names], dtype=bool)
        dev_ids = [i for i, c in enumerate(raw.cats) if c in DEVICE_CATS]
        self.on_device = np.isin(self.cat_id, dev_ids)
        self.steps = max(stats.steps, 1)
        self.step = step_of(stats, self.ts)
        self._region_at: np.ndarray | None = None
        self._region_keys: dict[int, str] = {}
        self._op_at: np.ndarray | None = None
        self._device: dict[int, float] | None = None
        self._launch: dict[int, int] | None = None

    def indices(self, names: set[str]) -> np.ndarray:
        """Indices of in-step events with one of these names."""
        ids = [i for i, n in enumerate(self.stats.raw.names) if n in names]
        if not ids:
            return np.zeros(0, dtype=np.int64)
        return np.nonzero(np.isin(self.name_id, ids) & self.stats.in_step)[0]

    def region_at(self) -> np.ndarray:
        """Per event, the index of the Torch-Compiled Region event around it (or itself), else -1."""
        if self._region_at is None:
            keys = {}
            for i, n in enumerate(self.stats.raw.names):
                m = REGION.match(n)
                if m:
                    keys[i] = m.group(1)
            mask = np.isin(self.name_id, list(keys)) if keys else np.zeros(len(self.ts), dtype=bool)
            self._region_at = nearest_ancestor(mask, self.parent)
            self._region_keys = keys
        return self._region_at

    def region(self, i: int) -> str | None:
        """The compiled graph ("0/0") of the Torch-Compiled Region around event i, if any."""
        r = int(self.region_at()[i])
        return self._region_keys.get(int(self.name_id[r])) if r >= 0 else None

    def under_op(self, i: int) -> bool:
        """Whether an op encloses event i (it is then not one of the ops user code called)."""
        return bool(self.under_op_mask(np.array([i]))[0])

    def under_op_mask(self, idx: np.ndarray) -> np.ndarray:
        """under_op for each of these events."""
        if self._op_at is None:
            self._op_at = nearest_ancestor(self.is_op[self.name_id], self.parent)
        p = self.parent[idx]
        return (p >= 0) & (self._op_at[np.maximum(p, 0)] >= 0)

    def launch_of(self, i: int) -> int:
        """The host event that launched device event i (same correlation id), or -1."""
        if self._launch is None:
            host = np.nonzero((self.corr >= 0) & ~self.on_device)[0]
            self._launch = dict(zip(self.corr[host].tolist(), host.tolist(), strict=True))
        return self._launch.get(int(self.corr[i]), -1)

    def device_under(self) -> dict[int, float]:
        """Device time launched from inside each host event (every enclosing event gets it)."""
        if self._device is None:
            dev = np.nonzero(self.on_device & (self.corr >= 0))[0]
            by_corr: dict[int, float] = {}
            for c, d in zip(self.corr[dev].tolist(), self.dur[dev].tolist(), strict=True):
                by_corr[c] = by_corr.get(c, 0.0) + d
            out: dict[int, float] = {}
            for i in np.nonzero((self.corr >= 0) & ~self.on_device)[0].tolist():
                d = by_corr.get(int(self.corr[i]), 0.0)
                p = i
                while p >= 0 and d:
                    out[p] = out.get(p, 0.0) + d
                    p = int(self.parent[p])
            self._device = out
        return self._device

    def per_step(self, idx, values) -> np.ndarray:
        """Summed values per counted step."""
        idx = np.asarray(idx, dtype=np.int64)
        s = self.step[idx] if len(idx) else np.zeros(0, dtype=np.int64)
        keep = s >= 0
        return np.bincount(s[keep], weights=np.asarray(values, dtype=np.float64)[keep],
                           minlength=self.steps)[: self.steps]


def _handle(key: str) -> int:
    tail = key.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _kernel_events(after: _Trace, log: CompileLog) -> dict[tuple[str, str], list[int]]:
    """(graph key, provenance key) -> the after-trace events that ran that kernel."""
    found: dict[tuple[str, str], list[int]] = {}
    graphs = log.by_key()
    named = log.by_profiler_name()
    names = after.stats.raw.names
    compiled = {e.name for e in after.stats.events if e.category == COMPILED}
    idx = after.indices(compiled)
    by_name: dict[int, list[int]] = {}
    for i, n in zip(idx.tolist(), after.name_id[idx].tolist(), strict=True):
        by_name.setdefault(n, []).append(i)
    device_names = {n for n, ev in by_name.items() if after.on_device[ev].any()}
    for n, events in by_name.items():
        name = names[n]
        if name in named:  # the C++ kernel profile names the graph: exact, for all its events at once
            g, kernel = named[name]
            keys = g.kernel_keys(kernel)
            if keys:
                found.setdefault((g.key, keys[0]), []).extend(events)
            continue
        for i in events:
            if n in device_names and not after.on_device[i]:
                continue  # the host-side record of a GPU kernel: its device event is timed instead
            host = after.launch_of(i) if after.on_device[i] else i
            region = after.region(host) if host >= 0 else None
            around = graphs.get(region) if region is not None else None
            keys = around.kernel_keys(name) if around is not None else []
            if around is not None and keys:
                found.setdefault((around.key, keys[0]), []).append(i)
    _extern_events(after, log, found)
    return found


def extern_op(key: str) -> str | None:
    """The op an extern or fallback kernel runs as (extern_kernels.addmm:2 -> aten::addmm), else None."""
    base = key.rsplit(":", 1)[0]
    if base.startswith(EXTERN):
        return f"aten::{base[len(EXTERN):]}"
    m = _FALLBACK.match(base)
    return f"{m.group('ns')}::{m.group('op')}" if m else None


def _extern_events(after: _Trace, log: CompileLog, found: dict) -> None:
    """Extern kernels (extern_kernels.addmm) run as aten ops inside their graph's region, in code order."""
    names = after.stats.raw.names
    externs: dict[str, dict[str, list[str]]] = {}  # graph -> op -> its extern keys in code order
    for g in log.graphs:
        keyed = ((k, op) for k in g.kernel_to_post if (op := extern_op(k)))
        for k, op in sorted(keyed, key=lambda ko: _handle(ko[0])):
            externs.setdefault(g.key, {}).setdefault(op, []).append(k)
    ops = {op for by_op in externs.values() for op in by_op}
    if not ops:
        return
    idx = after.indices(ops)
    region = after.region_at()[idx]
    keep = (region >= 0) & ~after.on_device[idx] & ~after.under_op_mask(idx)
    idx, region = idx[keep], region[keep]
    op_id = after.name_id[idx]
    # the graph of each call: the name ("Torch-Compiled Region: 0/0") of the region event around it
    graph_id = after.name_id[region]
    order = np.lexsort((after.ts[idx], op_id, region))
    idx, region, op_id, graph_id = idx[order], region[order], op_id[order], graph_id[order]
    # rank of each call among the calls of its op in the same run of the region (sorted by time)
    new_run = np.ones(len(idx), dtype=bool)
    new_run[1:] = (region[1:] != region[:-1]) | (op_id[1:] != op_id[:-1])
    starts = np.nonzero(new_run)[0]
    rank = np.arange(len(idx)) - np.repeat(starts, np.diff(np.append(starts, len(idx))))
    for g_id, o_id in set(zip(graph_id.tolist(), op_id.tolist(), strict=True)):
        m = REGION.match(names[g_id])
        gkey = m.group(1) if m else ""
        keys = externs.get(gkey, {}).get(names[o_id])
        if not keys:
            continue
        sel = (graph_id == g_id) & (op_id == o_id)
        # the n-th call in one run of the graph is the n-th extern kernel of that op in the code
        for n, key in enumerate(keys):
            hit = sel & ((rank == n) if n < len(keys) - 1 else (rank >= n))
            if hit.any():
                found.setdefault((gkey, key), []).extend(idx[hit].tolist())


def _norm_func(func: str | None) -> str | None:
    m = _RESUME.match(func or "")
    return m.group("func") if m else func


def _same_file(logged: str, profiled: str) -> bool:
    return logged == profiled or logged.endswith("/" + profiled.lstrip("./"))


class _EagerSites:
    """Eager op time per step, grouped by (op, file, function) when the trace has Python frames."""

    def __init__(self, before: _Trace, sources: dict[str, set[tuple[str, str | None]]], use_device: bool):
        self.t = before
        raw = before.stats.raw
        self.stack = any(c == "python_function" for c in raw.cats)
        wanted = set(sources)
        self.steps: dict[tuple, np.ndarray] = {}
        self.names: dict[tuple, set[str]] = {}
        device = before.device_under() if use_device else {}
        sites: dict[tuple, list[tuple[int, float]]] = {}
        for i in before.indices(wanted).tolist():
            if before.on_device[i] or before.under_op(i):
                continue
            name = raw.names[before.name_id[i]]
            site = (name, *self._frame(i, sources.get(name, set())))
            value = device.get(i, 0.0) if use_device else float(before.dur[i])
            sites.setdefault(site, []).append((i, value))
            self.names.setdefault(site, set()).add(name)
        for site, pairs in sites.items():
            self.steps[site] = before.per_step([i for i, _ in pairs], [v for _, v in pairs])

    def _frame(self, i: int, wanted: set[tuple[str, str | None]]) -> tuple:
        if not self.stack:
            return (None, None)
        raw = self.t.stats.raw
        p = int(self.t.parent[i])
        while p >= 0:
            m = PY_FRAME.match(raw.names[self.t.name_id[p]])
            if m:
                for file, func in wanted:
                    if func == m.group("func") and _same_file(file, m.group("file")):
                        return (file, func)
            p = int(self.t.parent[p])
        return (None, None)

    def site(self, op: str, file: str | None, func: str | None) -> tuple:
        """The site key of a pre-grad node (its source only counts when the eager trace has frames)."""
        return (op, file, func) if self.stack and (op, file, func) in self.steps else (op, None, None)


def _weight(steps: np.ndarray) -> float:
    # a kernel too quick to register still takes its part (no division by zero)
    return max(float(np.median(steps)) if len(steps) else 0.0, 1e-3)


def _eager_name(op: str) -> str:
    return op if "::" in op else f"aten::{op}"


def _producers(node) -> list[str]:
    """The pre-grad nodes a node reads: its inputs and, for a method call (`v.transpose`), its receiver."""
    receiver = node.target.split(".", 1)[0] if "." in node.target else ""
    return [*node.inputs, receiver] if receiver else list(node.inputs)


def region_claims(g: CompiledGraph, kernel_pre: dict[str, set[str]]) -> dict[str, set[str]]:
    """Pre-grad nodes of a graph that no kernel's provenance names, given to the kernel that rewrote them.

    A kernel rewrote a pattern when one of its post-grad nodes has no pre-grad origin (SDPA standing for
    matmul, softmax, matmul). An unnamed node goes to such a kernel when its data reaches the node from
    that kernel's nodes through unnamed nodes only (one pass in graph order: FX code is topological)."""
    rewrites = {k for k, post in g.kernel_to_post.items() if k in kernel_pre
                and any(not g.post_to_pre.get(n) for n in post)}
    owner: dict[str, str | None] = {}
    for k in sorted(kernel_pre):
        for p in kernel_pre[k]:
            if owner.get(p) is None:
                owner[p] = k if k in rewrites else None
    added: dict[str, set[str]] = {}
    reach: dict[str, str | None] = {}
    for name, node in g.pre_grad.items():
        if name in owner:
            continue
        found = next((r for q in _producers(node) if (r := owner.get(q) or reach.get(q))), None)
        reach[name] = found
        if found is not None:
            added.setdefault(found, set()).add(name)
    return added


def _claims(events: dict, graphs: dict, kernel_steps: dict) -> tuple[dict, dict, dict]:
    """Each kernel's pre-grad nodes by provenance, those added from its region, and per (graph, node)
    the compiled time of all the kernels it feeds (the weights an eager op is split by)."""
    kernel_pre: dict[tuple[str, str], set[str]] = {}
    for gk, key in events:
        g = graphs[gk]
        kernel_pre[(gk, key)] = {p for n in g.kernel_to_post[key] for p in g.post_to_pre.get(n, [])}
    region: dict[tuple[str, str], set[str]] = {}
    for gk in sorted({gk for gk, _key in events}):
        mine = {key: pre for (g2, key), pre in kernel_pre.items() if g2 == gk}
        for key, added in region_claims(graphs[gk], mine).items():
            region[(gk, key)] = added
    claims: dict[tuple[str, str], float] = {}
    for k in events:
        for p in kernel_pre[k] | region.get(k, set()):
            claims[(k[0], p)] = claims.get((k[0], p), 0.0) + _weight(kernel_steps[k])
    return kernel_pre, region, claims


def _kernel_steps(a: _Trace, events: dict) -> tuple[dict, bool]:
    on_device = any(a.on_device[i] for idx in events.values() for i in idx)
    out = {}
    for (gk, key), idx in events.items():
        extern_on_device = extern_op(key) is not None and on_device
        values = [a.device_under().get(i, 0.0) if extern_on_device else float(a.dur[i]) for i in idx]
        out[(gk, key)] = a.per_step(idx, values)
    return out, on_device


def attribute_provenance(before: TraceStats, after: TraceStats, log: CompileLog) -> list[KernelProvenance]:
    """Every kernel of the after trace that the provenance log accounts for, with what it replaced: the
    eager ops of its pre-grad nodes by provenance, then those of its region's unnamed nodes it rewrote."""
    b, a = _Trace(before), _Trace(after)
    events = _kernel_events(a, log)
    graphs = log.by_key()
    kernel_steps, on_device = _kernel_steps(a, events)
    use_device = on_device and bool(b.on_device.any())
    kernel_pre, region, claims = _claims(events, graphs, kernel_steps)
    sources: dict[str, set[tuple[str, str | None]]] = {}
    for gk, p in claims:
        node = graphs[gk].pre_grad.get(p)
        if node is not None:
            found = sources.setdefault(_eager_name(node.op), set())
            if node.file:
                found.add((node.file, _norm_func(node.func)))
    eager = _EagerSites(b, sources, use_device)
    site_nodes: dict[tuple, int] = {}
    node_site: dict[tuple[str, str], tuple] = {}
    for gk, p in claims:
        node = graphs[gk].pre_grad.get(p)
        if node is None:
            continue
        s = eager.site(_eager_name(node.op), node.file, _norm_func(node.func))
        node_site[(gk, p)] = s
        site_nodes[s] = site_nodes.get(s, 0) + 1
    out = []
    for (gk, key), idx in events.items():
        g = graphs[gk]
        replaced = np.zeros(b.steps)
        matched: set[str] = set()
        lines: dict[tuple[str, int], tuple[float, set[str]]] = {}
        share = _weight(kernel_steps[(gk, key)])
        for p in sorted(kernel_pre[(gk, key)] | region.get((gk, key), set())):  # fixed order: hash-free sums
            site = node_site.get((gk, p))
            if site is None or site not in eager.steps:
                continue
            # an eager op that several kernels share is split in proportion to those kernels' times;
            # one eager op site standing for several graph nodes (a loop, a reused module) evenly
            part = eager.steps[site] / site_nodes[site] * (share / claims[(gk, p)])
            replaced = replaced + part
            matched |= eager.names[site]
            node = g.pre_grad[p]
            if node.file:
                us, ops = lines.get((node.file, node.line or 0), (0.0, set()))
                lines[(node.file, node.line or 0)] = (us + float(part.sum()), ops | eager.names[site])
        out.append(_entry(g, key, idx, a, kernel_steps[(gk, key)], replaced, matched,
                          (kernel_pre[(gk, key)], region.get((gk, key), set())), lines,
                          "device" if use_device else "host"))
    out.sort(key=lambda k: (-k.replaced_us, k.graph, k.key))
    return out


def _entry(g: CompiledGraph, key: str, idx, a: _Trace, kernel_steps, replaced, matched,
           pre_sets: tuple[set[str], set[str]], lines: dict[tuple[str, int], tuple[float, set[str]]],
           replaced_from: str) -> KernelProvenance:
    names = a.stats.raw.names
    extern = extern_op(key) is not None
    post = g.kernel_to_post[key]
    # the innermost frame of each stack is the line that made the nodes; the rest is how it was reached
    seen: dict[tuple, SourceLine] = {}
    frames: dict[tuple, SourceLine] = {}
    for stack in g.stacks.get(key, []):
        seen.setdefault((stack[-1].file, stack[-1].line), stack[-1])
        for f in stack:
            frames.setdefault((f.file, f.line), f)
    if not seen:
        for n in post:
            node = g.post_grad.get(n)
            if node is not None and node.file:
                seen.setdefault((node.file, node.line), SourceLine(node.file, node.line or 0,
                                                                   node.func or "", node.code or ""))
    pre, region = pre_sets
    aten = sorted({_eager_name(g.pre_grad[p].op) for p in pre if p in g.pre_grad})
    code = {(n.file, n.line or 0): n.code or "" for n in g.pre_grad.values() if n.file}
    return KernelProvenance(
        name=key.rsplit(":", 1)[0] if extern else names[a.name_id[idx[0]]],
        kind=EXTERN_KIND if extern else FUSED, graph=g.key, key=key, post_grad=tuple(post),
        post_grad_aten=tuple(sorted({g.post_grad[n].op for n in post if n in g.post_grad})),
        pre_grad=tuple(sorted(pre)), aten=tuple(aten),
        source=tuple(seen.values()), stack=tuple(frames.values()),
        matched_before=tuple(sorted(matched)), kernel_steps=tuple(kernel_steps.tolist()),
        replaced_steps=tuple(np.asarray(replaced, dtype=np.float64).tolist()), replaced_from=replaced_from,
        region_pre_grad=tuple(sorted(region)),
        region_aten=tuple(sorted({_eager_name(g.pre_grad[p].op) for p in region} & matched - set(aten))),
        lines=tuple((f, n, code.get((f, n), ""), us, tuple(sorted(ops)))
                    for (f, n), (us, ops) in sorted(lines.items())))


def unclaimed(before: TraceStats, log: CompileLog, kernels: list[KernelProvenance]) -> list[dict]:
    """Pre-grad nodes of the graphs that ran that no kernel's provenance names, whose op the eager trace
    has: their eager time is in no kernel's `replaced` (a pattern such as attention rewritten whole)."""
    ran = {k.graph for k in kernels}
    claimed = {(k.graph, p) for k in kernels for p in (*k.pre_grad, *k.region_pre_grad)}
    eager = {e.name for e in before.events if e.category == OP}
    out = []
    for g in log.graphs:
        if g.key not in ran:
            continue
        for node in g.pre_grad.values():
            if (g.key, node.name) not in claimed and _eager_name(node.op) in eager:
                out.append({"graph": g.key, "node": node.name, "aten": _eager_name(node.op),
                            "file": node.file, "line": node.line, "code": node.code})
    return out
