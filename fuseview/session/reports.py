"""Typed reports, one class per kind: info, scan, fuse, profile, compare, trace (no Qt).

Each has one writer (to_json, and save for the file kinds) and one reader (from_json / load): the CLI's
--json output, the window and the profile child process all go through them. The profile and trace files
keep their schema (fuseview.profile v2, fuseview.trace_compare v1; validated by runtime.report and
traces.report); the in-memory kinds carry REPORT_VERSION in their JSON.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from fuseview.errors import FuseviewError
from fuseview.graph.document import ModelDocument

REPORT_VERSION = 1
PROFILE_KIND, TRACE_KIND = "fuseview.profile", "fuseview.trace_compare"  # as runtime.report, traces.report


def _known(cls: type, data: object, kind: str) -> dict[str, Any]:
    """data as keyword arguments of the dataclass cls: an object of its fields, nothing unknown."""
    if not isinstance(data, dict):
        raise FuseviewError(f"{kind} report: not a JSON object")
    names = {f.name for f in fields(cls)}
    extra = sorted(set(data) - names - {"kind", "report_version"})
    if extra:
        raise FuseviewError(f"{kind} report: unknown fields {', '.join(extra)}")
    missing = sorted(n for n in names if n not in data and _required(cls, n))
    if missing:
        raise FuseviewError(f"{kind} report: missing {', '.join(missing)}")
    return {k: v for k, v in data.items() if k in names}


def _required(cls: type, name: str) -> bool:
    f = next(f for f in fields(cls) if f.name == name)
    return f.default is MISSING and f.default_factory is MISSING


# ------------------------------------------------------------------------------------------- info
@dataclass
class InfoReport:
    """What a model is: `fuseview info` (text and --json)."""

    KIND: ClassVar[str] = "fuseview.info"
    model: str
    ir_version: int
    opsets: dict[str, int]
    producer: str
    nodes: int
    visible_nodes: int
    initializers: int
    functions: list[str]
    ops: dict[str, int]
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, doc: ModelDocument) -> InfoReport:
        """The report of a loaded document."""
        g = doc.graph
        nodes, drawn = g.node_counts()  # the one count: the window's status bar and pane titles use it too

        def sig(names: list[str]) -> list[dict[str, Any]]:
            return [
                {"name": n, "dtype": g.tensors[n].dtype, "shape": list(g.tensors[n].shape or [])}
                if n in g.tensors
                else {"name": n, "dtype": None, "shape": None}
                for n in names
            ]

        return cls(
            model=str(doc.path), ir_version=doc.ir_version, opsets=dict(doc.opsets), producer=doc.producer,
            nodes=nodes, visible_nodes=drawn,
            initializers=sum(1 for t in g.tensors.values() if t.kind == "initializer"),
            functions=sorted(doc.functions), ops=doc.op_histogram(), inputs=sig(g.inputs),
            outputs=sig(g.outputs), warnings=list(doc.warnings),
        )

    def to_json(self) -> dict[str, Any]:
        """The --json object (its keys are the fields)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> InfoReport:
        """The report to_json wrote."""
        return cls(**_known(cls, data, "info"))

    def lines(self) -> list[str]:
        """The text `fuseview info` prints."""
        out = [
            f"model      {self.model}",
            f"producer   {self.producer or '-'}   ir {self.ir_version}",
            "opsets     " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in self.opsets.items()),
            f"nodes      {self.nodes} ({self.visible_nodes} drawn, constants folded)",
            f"weights    {self.initializers} initializers",
        ]
        for label, sigs in (("input", self.inputs), ("output", self.outputs)):
            for s in sigs:
                shape = "[" + ", ".join(str(d) for d in s["shape"]) + "]" if s["shape"] is not None else "?"
                out.append(f"{label:<10} {s['name']}: {s['dtype']} {shape}")
        out.append("ops        " + ", ".join(f"{k} {v}" for k, v in self.ops.items()))
        out += [f"warning    {w}" for w in self.warnings]
        return out


# ------------------------------------------------------------------------------------------- scan
@dataclass
class ScanReport:
    """The candidates of a model: `fuseview scan --json`, and what the window lists."""

    KIND: ClassVar[str] = "fuseview.scan"
    model: str | None
    dims: dict[str, int]
    candidates: list[dict[str, Any]]
    near_misses: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    profile: dict[str, Any] | None = None  # the profile report the measured times come from
    ort_check: dict[str, Any] | None = None  # onnxruntime's own fusions (fusion.ort_compare)

    @classmethod
    def of(cls, scan: Any, costs: dict[str, Any] | None = None, ort_check: Any = None,
           profile: dict[str, Any] | None = None) -> ScanReport:
        """The report of a ScanResult, with measured costs per candidate id and onnxruntime's check."""
        base = scan.to_json()
        costs = costs or {}
        for c in base["candidates"]:
            cost = costs.get(c["id"])
            if cost is not None:
                c["measured_us"], c["share"] = cost.measured_us, cost.share
                if cost.traffic_us is not None:  # the roofline's part: a profile of schema 3
                    c.update(traffic_us=cost.traffic_us, bound=cost.bound, compute_share=cost.compute_share)
            c["ort_does_it"] = ort_check.does_it.get(c["id"]) if ort_check is not None else None
        return cls(base["model"], base["dims"], base["candidates"], base["near_misses"], base["notes"],
                   profile, ort_check.to_json() if ort_check is not None else None)

    def to_json(self) -> dict[str, Any]:
        """The --json object; profile and ort_check appear only when there are some."""
        out = asdict(self)
        for key in ("profile", "ort_check"):
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def from_json(cls, data: object) -> ScanReport:
        """The report to_json wrote."""
        return cls(**_known(cls, data, "scan"))


# ------------------------------------------------------------------------------------------- fuse
@dataclass
class FuseReport:
    """What Apply / `fuseview fuse` did: fusions per rule, node counts, notes, the validation."""

    KIND: ClassVar[str] = "fuseview.fuse"
    model: str | None
    candidates: int
    applied: dict[str, int]  # "rule -> domain:op" -> how many
    nodes_before: int
    nodes_after: int
    notes: list[str] = field(default_factory=list)
    validation: str = "not validated"  # Validation.headline()
    valid: bool | None = None  # None: not validated

    @classmethod
    def of(cls, model: Any, scan: Any, outcome: Any,
           path: str | os.PathLike[str] | None = None) -> FuseReport:
        """The report of a FuseOutcome (fusion.pipeline.build_fused) of model after scan."""
        result, v = outcome.result, outcome.validation
        applied: dict[str, int] = {}
        for c in result.applied:
            key = f"{c.rule} -> {c.domain + ':' if c.domain else ''}{c.fused_op}"
            applied[key] = applied.get(key, 0) + 1
        return cls(None if path is None else str(path), len(scan.candidates), applied, len(model.graph.node),
                   len(result.model.graph.node), list(outcome.notes),
                   "not validated" if v is None else v.headline(), None if v is None else bool(v.ok))

    @property
    def fusions(self) -> int:
        """How many candidates were applied."""
        return sum(self.applied.values())

    def status_line(self) -> str:
        """One line for the window's status bar."""
        return f"Applied {self.fusions} fusions: {self.validation}" + (
            "; " + "; ".join(self.notes) if self.notes else ""
        )

    def to_json(self) -> dict[str, Any]:
        """The report as JSON."""
        return {"kind": self.KIND, "report_version": REPORT_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: object) -> FuseReport:
        """The report to_json wrote."""
        return cls(**_known(cls, data, "fuse"))


# ------------------------------------------------------------------------------------ profile, compare
@dataclass
class CompareReport:
    """A profile's comparison of two models: outputs, per-fusion times, the latency verdict."""

    passed: bool
    outputs: dict[str, Any]
    fusions: list[dict[str, Any]]
    latency: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # the other keys of the comparison, as written

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompareReport:
        """The comparison object of a (validated) profile report."""
        known = {"passed", "outputs", "fusions", "latency"}
        return cls(bool(data["passed"]), data["outputs"], data["fusions"], data.get("latency"),
                   {k: v for k, v in data.items() if k not in known})

    def to_json(self) -> dict[str, Any]:
        """The comparison object as the profile report holds it."""
        out = {**self.extra, "passed": self.passed, "outputs": self.outputs, "fusions": self.fusions}
        if self.latency is not None:
            out["latency"] = self.latency
        return out

    @property
    def verdict(self) -> str | None:
        """stats.verdict of the latency interval (faster, slower, no difference, cannot tell) or None."""
        from fuseview.stats import verdict

        if self.latency is None:
            return None
        lo, hi = self.latency["ci"]
        return verdict(lo, hi, self.latency["threshold"])

    def speedup_text(self) -> str:
        """'1.23x [1.10, 1.35] faster', or '' without a latency comparison."""
        from fuseview.runtime import report as profile_schema

        return "" if self.latency is None else profile_schema.speedup_text(self.latency)


@dataclass
class ProfileReport:
    """A profile (fuseview.profile, schema_version 3): what `fuseview profile --json` and the child write."""

    KIND: ClassVar[str] = PROFILE_KIND
    schema_version: int
    created: str
    environment: dict[str, Any]
    inputs: dict[str, Any]
    models: list[dict[str, Any]]
    comparison: CompareReport | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # ort_fusions, overhead, ... as written

    @classmethod
    def from_json(cls, data: object, source: str = "report") -> ProfileReport:
        """A checked report (FuseviewError naming the first field that does not fit the schema).

        NaN and infinities become null and numpy scalars Python numbers first, as in the file.
        """
        from fuseview.runtime import report as profile_schema

        data = profile_schema.json_safe(data)
        profile_schema.validate(data, source)
        assert isinstance(data, dict)
        cmp = data.get("comparison")
        known = {"kind", "schema_version", "created", "environment", "inputs", "models", "comparison"}
        return cls(data["schema_version"], data["created"], data["environment"], data["inputs"],
                   data["models"], CompareReport.from_json(cmp) if cmp is not None else None,
                   {k: v for k, v in data.items() if k not in known})

    def to_json(self) -> dict[str, Any]:
        """The report as the file holds it."""
        return {
            "schema_version": self.schema_version, "kind": self.KIND, "created": self.created,
            "environment": self.environment, "inputs": self.inputs, "models": self.models,
            "comparison": None if self.comparison is None else self.comparison.to_json(), **self.extra,
        }

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ProfileReport:
        """Read and check a report file (bounded read; FuseviewError on anything else)."""
        from fuseview.runtime import report as profile_schema

        return cls.from_json(profile_schema.load_report(path), str(path))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the report atomically."""
        from fuseview.runtime import report as profile_schema

        return profile_schema.save_report(self.to_json(), path)

    def text(self) -> str:
        """The report as JSON text (`--json -`)."""
        from fuseview.runtime import report as profile_schema

        return profile_schema.report_text(self.to_json())

    @property
    def passed(self) -> bool:
        """False when a comparison found outputs beyond tolerance (the CLI then exits 3)."""
        return self.comparison is None or self.comparison.passed


# ------------------------------------------------------------------------------------------- trace
@dataclass
class TraceReport:
    """Profiler traces summarised or compared (fuseview.trace_compare v2): `fuseview trace`, its window."""

    KIND: ClassVar[str] = TRACE_KIND
    schema_version: int
    traces: list[dict[str, Any]]
    diff: dict[str, Any] | None = None
    provenance_log: str | None = None  # the TORCH_TRACE log of an exact attribution
    provenance_choice: dict[str, Any] | None = None  # that log, and the folder's other logs with why not

    @classmethod
    def from_json(cls, data: object) -> TraceReport:
        """A checked report (FuseviewError naming what does not fit the schema; version 1 is upgraded)."""
        from fuseview.traces import report as trace_schema

        rep = trace_schema.validate_report(data)
        return cls(rep["schema_version"], rep["traces"], rep["diff"], rep.get("provenance_log"),
                   rep.get("provenance_choice"))

    def to_json(self) -> dict[str, Any]:
        """The report as the file holds it."""
        return {"schema_version": self.schema_version, "kind": self.KIND, "traces": self.traces,
                "provenance_log": self.provenance_log, "provenance_choice": self.provenance_choice,
                "diff": self.diff}

    def text(self) -> str:
        """The checked report as JSON text (`--json -`)."""
        from fuseview.traces import report as trace_schema

        return trace_schema.report_text(self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TraceReport:
        """Read and check a report file."""
        from fuseview.traces import report as trace_schema

        return cls.from_json(trace_schema.load_report(path))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Check and write the report atomically."""
        from fuseview.traces import report as trace_schema

        return trace_schema.save_report(self.to_json(), path)
