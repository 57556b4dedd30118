"""The typed reports of a model: info, scan and fuse (`fuseview info/scan/fuse --json`, the window).

Each has one writer (to_json) and one reader (from_json); they carry REPORT_VERSION in their JSON.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from fuseview.graph.document import ModelDocument
from fuseview.reports.base import REPORT_VERSION, known_fields


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
        return cls(**known_fields(cls, data, "info"))

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
        return cls(**known_fields(cls, data, "scan"))


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
    floor: str | None = None  # --float16: the float16 original against the float32 one (FuseOutcome)

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
                   "not validated" if v is None else v.headline(), None if v is None else bool(v.ok),
                   outcome.floor_line() if hasattr(outcome, "floor_line") else None)

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
        return cls(**known_fields(cls, data, "fuse"))
