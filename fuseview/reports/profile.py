"""The profile report (fuseview.profile, schema_version 3) typed: what `fuseview profile --json`, the profile
child process and the Profile dock write and read. The file schema is checked in runtime.report."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

PROFILE_KIND = "fuseview.profile"  # as runtime.report


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
        """faster, slower or no difference; None without a latency comparison."""
        return None if self.latency is None else str(self.latency["verdict"])

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
