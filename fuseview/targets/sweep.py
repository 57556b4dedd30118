"""Sweeps: one tune per model and dims set, here one after another or as parallel tasks on a Ray cluster.

Each item writes `<item>.onnx` (the tuned model, the original when no fusion helps) and then
`<item>.tune.json` into the output folder; an item whose report exists is done and is skipped when the
sweep runs again. The summary (`sweep.json`, `sweep.txt`) lists every item: the set chosen, its speed-up
over the original and over accept-all with the interval, and the node it was measured on.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuseview.atomic import write_atomic, write_text_atomic
from fuseview.errors import FuseviewError
from fuseview.runtime.runner import TargetError, bytes_writer
from fuseview.targets import open_target, parse_target

SUMMARY_JSON, SUMMARY_TEXT = "sweep.json", "sweep.txt"
REPORT_SUFFIX = ".tune.json"
# A tune may pass its budget by its final check; a task still running at twice it (and a minute for
# loading, scanning and writing) has hung or its node is overloaded: it counts as over the budget.
TASK_SLACK_S = 60.0

Progress = Callable[[str, float], None]


@dataclass
class SweepItem:
    """One tune of a sweep: a model at one dims set, and the name its files take in the output folder."""

    name: str
    model: str
    dims: dict[str, int]


@dataclass
class SweepRow:
    """A line of the summary."""

    item: str
    model: str
    dims: dict[str, int]
    status: str  # "tuned", "done before" or "failed: ..."
    chosen: str | None = None
    accepted: int | None = None
    x_original: float | None = None
    x_accept_all: float | None = None
    interval: list[float] | None = None
    verdict: str | None = None
    node: str | None = None


@dataclass
class SweepSummary:
    """Every item's row; `failed` lists those that did not finish."""

    target: dict
    rows: list[SweepRow] = field(default_factory=list)

    @property
    def failed(self) -> list[SweepRow]:
        """Rows of items that did not finish."""
        return [r for r in self.rows if r.status.startswith("failed")]

    def to_json(self) -> dict:
        """The summary file's content (kind fuseview.sweep)."""
        return {"kind": "fuseview.sweep", "schema_version": 1, "target": self.target,
                "items": [dataclasses.asdict(r) for r in self.rows]}

    def text(self) -> str:
        """The summary as a table."""
        w = max([4, *(len(r.item) for r in self.rows)]) + 2
        lines = [f"{'item':<{w}}{'chosen':<16}{'x original':>11}{'x accept-all':>13}  {'interval':<15}"
                 f"{'node':<16}status"]
        for r in self.rows:
            chosen = f"{(r.chosen or '-').replace('_', '-')} ({r.accepted})" if r.chosen else "-"
            iv = f"[{r.interval[0]:.2f}, {r.interval[1]:.2f}]" if r.interval else "-"
            lines.append(f"{r.item:<{w}}{chosen[:15]:<16}{_x(r.x_original):>11}{_x(r.x_accept_all):>13}"
                         f"  {iv:<15}{(r.node or '-')[:15]:<16}{r.status}")
        return "\n".join(lines)


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _slug(dims: dict[str, int]) -> str:
    return "-".join(f"{re.sub(r'[^A-Za-z0-9_]+', '_', k)}{v}" for k, v in sorted(dims.items()))


def plan_items(models: Sequence[str | os.PathLike], dims_sets: Sequence[dict[str, int]]) -> list[SweepItem]:
    """Every (model, dims set) with a file name of its own (the model's stem, the dims, a number when two
    models share a stem)."""
    sets = list(dims_sets) or [{}]
    items: list[SweepItem] = []
    taken: set[str] = set()
    for m in models:
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(m).stem) or "model"
        for dims in sets:
            base = stem + (f".{_slug(dims)}" if dims else "")
            name, n = base, 2
            while name in taken:
                name, n = f"{base}.{n}", n + 1
            taken.add(name)
            items.append(SweepItem(name, str(m), dict(dims)))
    return items


def tune_one(model: Any, settings: dict, folder: str | os.PathLike, name: str) -> dict:
    """Tune a model file or proto with these TuneSettings fields and write `<name>.onnx` into folder;
    {"report": the tune report's JSON, "unchanged": no fusion kept}."""
    from fuseview.workflows.tune import tune_item

    return tune_item(model, settings, folder, name)  # the one tune recipe, here and on a Ray node


def _row(item: SweepItem, report: dict, status: str) -> SweepRow:
    final = report.get("final") or {}
    orig, acc = final.get("against_original") or {}, final.get("against_accept_all") or {}
    from fuseview.reports.tune import report_environment

    target = (report_environment(report) or {}).get("target") or {}
    node = target.get("hostname") if target.get("kind") == "ray" else "local"
    return SweepRow(item.name, item.model, item.dims, status, final.get("chosen"), final.get("accepted"),
                    orig.get("speedup_p50"), acc.get("speedup_p50"), orig.get("ci"), orig.get("verdict"),
                    node)


def _finish(item: SweepItem, done: dict, environment: dict, out: Path) -> SweepRow:
    """Write a finished item's files (the model first, the report last: it marks the item done)."""
    from fuseview.reports.tune import TuneReport

    for fname, data in (done.get("files") or {}).items():
        if "/" in fname or fname.startswith("."):
            raise TargetError(f"{item.name}: the node returned a bad file name {fname!r}")
        write_atomic(out / fname, bytes_writer(data))
    report = TuneReport.from_json(done["report"])
    report.model, report.output = item.model, str(out / f"{item.name}.onnx")
    report.environment = environment
    report.save(out / f"{item.name}{REPORT_SUFFIX}")
    return _row(item, report.to_json(), "tuned")


def sweep(models: Sequence[str | os.PathLike], out_dir: str | os.PathLike, target: str | None = "local",
          dims_sets: Sequence[dict[str, int]] = (), progress: Progress | None = None, cancel=None,
          **settings: Any) -> SweepSummary:
    """Tune every model at every dims set (settings: TuneSettings fields, budget_s per item) into out_dir."""
    from fuseview.safe_io import load_json
    from fuseview.tuning.settings import TuneSettings

    kind, _address = parse_target(target)
    out = Path(out_dir)
    if not out.is_dir():
        raise FuseviewError(f"-o {out}: not a folder (create it first)")
    for m in models:
        if not Path(m).is_file():
            raise FuseviewError(f"{m}: no such model file")
    base = TuneSettings(**settings)
    base.check()
    items = plan_items(models, dims_sets)
    rows: dict[str, SweepRow] = {}
    todo = []
    for it in items:
        rep = out / f"{it.name}{REPORT_SUFFIX}"
        if rep.is_file():
            rows[it.name] = _row(it, load_json(rep, "report", "JSON tune report"), "done before")  # type: ignore[arg-type]
        else:
            todo.append(it)
    runner: Any = open_target(target, base.provider) if todo or kind == "local" else None
    summary = SweepSummary(runner.describe() if runner is not None else {"kind": kind})

    def fields_for(it: SweepItem) -> dict:
        s = dataclasses.replace(base, dims={**base.dims, **it.dims})
        return {f.name: getattr(s, f.name) for f in dataclasses.fields(s) if f.name != "target"}

    by_name = {it.name: it for it in todo}
    if todo and kind == "local":
        for i, it in enumerate(todo):
            if progress:
                progress(f"tuning {it.name} ({i + 1} of {len(todo)})", i / len(todo))
            from fuseview.runtime.profiling import check_cancel

            check_cancel(cancel)
            done = tune_one(it.model, fields_for(it), out, it.name)
            rows[it.name] = _finish(it, {"report": done["report"]}, runner.environment(), out)
    elif todo:
        per_item = 2 * base.budget_s + TASK_SLACK_S
        results = runner.tune_many([(it.name, it.model, fields_for(it)) for it in todo], per_item, cancel)
        for n, (name, res) in enumerate(results):
            it = by_name[name]
            if progress:
                progress(f"{name} finished ({n + 1} of {len(todo)})", (n + 1) / len(todo))
            if isinstance(res, Exception):
                rows[name] = SweepRow(it.name, it.model, it.dims, f"failed: {res}")
                continue
            env = {**res["environment"], "target": {**runner.describe(), "node_id": res["environment"].get(
                "node_id"), "hostname": res["environment"].get("hostname")}}
            rows[name] = _finish(it, res, env, out)
    summary.rows = [rows[it.name] for it in items]
    write_text_atomic(out / SUMMARY_JSON, json.dumps(summary.to_json(), indent=1, allow_nan=False) + "\n")
    write_text_atomic(out / SUMMARY_TEXT, summary.text() + "\n")
    return summary


def task_deadline(per_item_s: float, items: int, slots: int) -> float:
    """Seconds all items may take when `slots` run at once and each may take per_item_s."""
    return per_item_s * math.ceil(items / max(1, slots))
