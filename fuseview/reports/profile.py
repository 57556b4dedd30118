"""The profile report (fuseview.profile, schema_version 3) typed: what `fuseview profile --json`, the profile
child process and the Profile dock write and read. The file schema is checked in runtime.report."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from fuseview.reports.base import JSON, FlatRecord, ordered, split

PROFILE_KIND = "fuseview.profile"  # as runtime.report


@dataclass
class TimeStats(FlatRecord):
    """A time over the runs (ms for latency, µs otherwise): mean, median, 90th percentile (+ what else)."""

    TYPED: ClassVar[tuple[str, ...]] = ("mean", "p50", "p90")
    mean: float
    p50: float
    p90: float
    extra: JSON = field(default_factory=dict)  # min, max, std, ... as written
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)


@dataclass
class PartTime(FlatRecord):
    """A part of a model's run: its time per run (µs) and its share of the summed node time."""

    mean_us: float
    p50_us: float
    p90_us: float
    share: float
    extra: JSON = field(default_factory=dict, kw_only=True)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False, kw_only=True)


@dataclass
class NodeTime(PartTime):
    """One node: its name, op type, provider and where its time comes from (host-side on CUDA)."""

    TYPED: ClassVar[tuple[str, ...]] = ("name", "op_type", "provider", "time_source", "mean_us", "p50_us",
                                        "p90_us", "share")
    name: str
    op_type: str
    provider: str
    time_source: str

    @property
    def device_mean_us(self) -> float | None:
        """The node's GPU kernel time per run (µs, CUPTI) on a CUDA profile; None elsewhere."""
        us = self.extra.get("device_mean_us")
        return float(us) if isinstance(us, (int, float)) and not isinstance(us, bool) else None


@dataclass
class OpTime(PartTime):
    """One op type's nodes together: the type, provider and how many nodes."""

    TYPED: ClassVar[tuple[str, ...]] = ("op_type", "provider", "nodes", "mean_us", "p50_us", "p90_us",
                                        "share")
    op_type: str
    provider: str
    nodes: int


@dataclass
class ModelProfile:
    """One profiled model: where it ran, its latency, run and node times, per node and per op type."""

    TYPED: ClassVar[tuple[str, ...]] = ("role", "path", "provider", "ort_opt_level", "runs", "warmup",
                                        "latency_ms", "run_us", "node_sum_us", "nodes", "op_types",
                                        "cuda_kernel_events")
    role: str  # original, fused, against, ...
    path: str | None
    provider: JSON  # requested and used execution provider
    ort_opt_level: str
    runs: int
    warmup: int
    latency_ms: TimeStats
    run_us: TimeStats
    node_sum_us: TimeStats
    nodes: list[NodeTime]
    op_types: list[OpTime]
    cuda_kernel_events: bool
    extra: JSON = field(default_factory=dict)  # roofline (schema 3), profiled_runs, ... as written
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def roofline(self) -> JSON | None:
        """The model's roofline section (schema 3), if profiled with one."""
        roof = self.extra.get("roofline")
        return roof if isinstance(roof, dict) else None

    @property
    def placement(self) -> JSON | None:
        """Where the nodes ran: nodes and time per provider, the Memcpy nodes (runtime.placement)."""
        place = self.extra.get("placement")
        return place if isinstance(place, dict) else None

    @property
    def device_time(self) -> JSON | None:
        """GPU kernel time per node and busy time per run (CUDA runs), or why there is none; else None."""
        dev = self.extra.get("device_time")
        return dev if isinstance(dev, dict) else None

    @classmethod
    def from_json(cls, d: JSON) -> ModelProfile:
        """The model of a checked report."""
        extra, order = split(d, cls.TYPED)
        return cls(d["role"], d["path"], d["provider"], d["ort_opt_level"], d["runs"], d["warmup"],
                   TimeStats.from_json(d["latency_ms"]), TimeStats.from_json(d["run_us"]),
                   TimeStats.from_json(d["node_sum_us"]), [NodeTime.from_json(n) for n in d["nodes"]],
                   [OpTime.from_json(o) for o in d["op_types"]], d["cuda_kernel_events"], extra=extra,
                   order=order)

    def to_json(self) -> JSON:
        """As the report holds it."""
        known: JSON = {k: getattr(self, k) for k in self.TYPED}
        for key in ("latency_ms", "run_us", "node_sum_us"):
            known[key] = known[key].to_json()
        known["nodes"] = [n.to_json() for n in self.nodes]
        known["op_types"] = [o.to_json() for o in self.op_types]
        return ordered(known, self.extra, self.order)


@dataclass
class Environment(FlatRecord):
    """Where a profile ran: onnxruntime's version and providers, the CPU, the GPU, platform, Python."""

    TYPED: ClassVar[tuple[str, ...]] = ("onnxruntime", "providers", "cpu", "gpu", "platform", "python")
    onnxruntime: str
    providers: list[str]
    cpu: str | None
    gpu: str | None
    platform: str
    python: str
    extra: JSON = field(default_factory=dict)  # target, threads, ... as written
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)


@dataclass
class ProfileInputs(FlatRecord):
    """The inputs every model ran on: where they came from, the seed, the dims, each feed."""

    TYPED: ClassVar[tuple[str, ...]] = ("source", "seed", "dims", "feeds")
    source: str
    seed: int | None
    dims: JSON
    feeds: list[JSON]
    extra: JSON = field(default_factory=dict)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)


@dataclass
class LatencyComparison(FlatRecord):
    """The interleaved A/B latency: speed-up (without ÷ with), its interval, the verdict, the noise."""

    TYPED: ClassVar[tuple[str, ...]] = ("method", "runs", "level", "speedup_p50", "ci", "threshold",
                                        "verdict", "noise")
    method: str
    runs: int
    level: float
    speedup_p50: float
    ci: list[float]
    threshold: float
    verdict: str
    noise: JSON  # cv_model, cv_against, warning
    extra: JSON = field(default_factory=dict)  # sessions, ... as written
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)


# ------------------------------------------------------------------------------------ profile, compare
@dataclass
class CompareReport:
    """A profile's comparison of two models: outputs, per-fusion times, the latency verdict."""

    passed: bool
    outputs: dict[str, Any]
    fusions: list[dict[str, Any]]
    latency: LatencyComparison | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # the other keys of the comparison, as written

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompareReport:
        """The comparison object of a (validated) profile report."""
        lat = data.get("latency")
        # schema 2 checks the latency; one in a version 1 file (never written by fuseview) stays as read
        typed = isinstance(lat, dict) and all(k in lat for k in LatencyComparison.TYPED)
        known = {"passed", "outputs", "fusions"} | ({"latency"} if typed or lat is None else set())
        return cls(bool(data["passed"]), data["outputs"], data["fusions"],
                   LatencyComparison.from_json(lat) if typed and isinstance(lat, dict) else None,
                   {k: v for k, v in data.items() if k not in known})

    @property
    def placement_flag(self) -> str | None:
        """"fusion moved work to the CPU: ..." when the fused model runs more on the CPU EP, else None."""
        flag = self.extra.get("placement_flag")
        return flag if isinstance(flag, str) else None

    def to_json(self) -> dict[str, Any]:
        """The comparison object as the profile report holds it."""
        out = {**self.extra, "passed": self.passed, "outputs": self.outputs, "fusions": self.fusions}
        if self.latency is not None:
            out["latency"] = self.latency.to_json()
        return out

    @property
    def verdict(self) -> str | None:
        """stats.verdict of the latency interval (faster, slower, no difference, cannot tell) or None."""
        from fuseview.stats import verdict

        if self.latency is None:
            return None
        lo, hi = self.latency.ci
        return verdict(lo, hi, self.latency.threshold)

    def speedup_text(self) -> str:
        """'1.23x [1.10, 1.35] faster', or '' without a latency comparison."""
        from fuseview.runtime import report as profile_schema

        return "" if self.latency is None else profile_schema.speedup_text(self.latency.to_json())


@dataclass
class ProfileReport:
    """A profile (fuseview.profile, schema_version 3): what `fuseview profile --json` and the child write."""

    KIND: ClassVar[str] = PROFILE_KIND
    schema_version: int
    created: str
    environment: Environment
    inputs: ProfileInputs
    models: list[ModelProfile]
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
        models = [ModelProfile.from_json(m) for m in data["models"]]
        return cls(data["schema_version"], data["created"], Environment.from_json(data["environment"]),
                   ProfileInputs.from_json(data["inputs"]), models,
                   CompareReport.from_json(cmp) if cmp is not None else None,
                   {k: v for k, v in data.items() if k not in known})

    def to_json(self) -> dict[str, Any]:
        """The report as the file holds it."""
        return {
            "schema_version": self.schema_version, "kind": self.KIND, "created": self.created,
            "environment": self.environment.to_json(), "inputs": self.inputs.to_json(),
            "models": [m.to_json() for m in self.models],
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

    def verdict_line(self) -> str | None:
        """The one verdict line of the comparison, with speed-up and interval (None without a latency)."""
        from fuseview.runtime import report as profile_schema

        return profile_schema.verdict_line(self.to_json())

    @property
    def passed(self) -> bool:
        """False when a comparison found outputs beyond tolerance (the CLI then exits 3)."""
        return self.comparison is None or self.comparison.passed
