"""Sweeps: one tune per model and dims set, through the target's tune_many (here one after another, on a Ray
cluster as parallel tasks), each item the one tune recipe (fuseview.workflows.tune.tune_item).

Each item writes `<item>.onnx` (the tuned model, the original when no fusion helps) and then
`<item>.tune.json` into the output folder; an item whose report exists is done and is skipped when the
sweep runs again. The summary (`sweep.json`, `sweep.txt`) lists every item: the set chosen, its speed-up
over the original and over accept-all with the interval, and the node it was measured on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fuseview.atomic import check_output, write_atomic, write_text_atomic
from fuseview.errors import FuseviewError
from fuseview.progress import Progress
from fuseview.runtime.runner import TargetError, bytes_writer
from fuseview.targets import open_target, parse_target
from fuseview.targets.stamp import stamp_tune
from fuseview.workflows.tune import tune_item

SUMMARY_JSON, SUMMARY_TEXT = "sweep.json", "sweep.txt"
REPORT_SUFFIX = ".tune.json"
# A tune may pass its budget by its final check; a task still running at twice it (and a minute for
# loading, scanning and writing) has hung or its node is overloaded: it counts as over the budget.
TASK_SLACK_S = 60.0

if TYPE_CHECKING:
    from fuseview.runtime.profiling import Cancel
    from fuseview.tuning.settings import TuneSettings


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

    target: dict[str, Any]
    rows: list[SweepRow] = field(default_factory=list)

    @property
    def failed(self) -> list[SweepRow]:
        """Rows of items that did not finish."""
        return [r for r in self.rows if r.status.startswith("failed")]

    def to_json(self) -> dict[str, Any]:
        """The summary file's content (kind fuseview.sweep)."""
        return {"kind": "fuseview.sweep", "schema_version": 1, "target": self.target,
                "items": [dataclasses.asdict(r) for r in self.rows]}

    def text(self) -> str:
        """The summary as a table."""
        w = max([4, *(len(r.item) for r in self.rows)]) + 2
        lines = [f"{'item':<{w}}{'chosen':<16}{'x original':>11}{'x accept-all':>13}  {'interval':<15}"
                 f"{'verdict':<15}{'node':<16}status"]
        for r in self.rows:
            chosen = f"{(r.chosen or '-').replace('_', '-')} ({r.accepted})" if r.chosen else "-"
            iv = f"[{r.interval[0]:.2f}, {r.interval[1]:.2f}]" if r.interval else "-"
            lines.append(f"{r.item:<{w}}{chosen[:15]:<16}{_x(r.x_original):>11}{_x(r.x_accept_all):>13}"
                         f"  {iv:<15}{(r.verdict or '-')[:14]:<15}{(r.node or '-')[:15]:<16}{r.status}")
        return "\n".join(lines)


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _slug(dims: dict[str, int]) -> str:
    return "-".join(f"{re.sub(r'[^A-Za-z0-9_]+', '_', k)}{v}" for k, v in sorted(dims.items()))


def plan_items(models: Sequence[str | os.PathLike[str]], dims_sets: Sequence[dict[str, int]]
               ) -> list[SweepItem]:
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


def _row(item: SweepItem, report: dict[str, Any], status: str) -> SweepRow:
    final = report.get("final") or {}
    orig, acc = final.get("against_original") or {}, final.get("against_accept_all") or {}
    chosen = final.get("chosen")
    x_orig, x_acc = orig.get("speedup_p50"), acc.get("speedup_p50")
    baseline = report.get("baseline") or {}
    all_x = ((baseline.get("accept_all") or {}).get("effect") or {}).get("speedup_p50")
    if chosen == "original":
        x_orig = 1.0  # the chosen model is the original
    if x_acc is None and isinstance(all_x, (int, float)) and all_x > 0 and isinstance(x_orig, (int, float)):
        x_acc = x_orig / all_x  # not measured against it at the end: derived from the baseline's accept-all
    if chosen == "accept_all" or baseline.get("candidates") == 0:  # no candidates: accept-all is the original
        x_acc = 1.0
    from fuseview.reports.tune import report_environment

    target = (report_environment(report) or {}).get("target") or {}
    node = target.get("hostname") if target.get("kind") == "ray" else "local"
    return SweepRow(item.name, item.model, item.dims, status, chosen, final.get("accepted"), x_orig, x_acc,
                    orig.get("ci"), orig.get("verdict") or final.get("verdict"), node)


def _finish(item: SweepItem, done: dict[str, Any], out: Path) -> SweepRow:
    """Write a finished item's files (the model first, the report last: it marks the item done); the
    report's environment is the one its target gave (where the item ran)."""
    from fuseview.reports.tune import TuneReport

    for fname, data in (done.get("files") or {}).items():
        if "/" in fname or fname.startswith("."):
            raise TargetError(f"{item.name}: the node returned a bad file name {fname!r}")
        write_atomic(out / fname, bytes_writer(data))
    report = TuneReport.from_json(done["report"])
    report.model, report.output = item.model, str(out / f"{item.name}.onnx")
    stamp_tune(report, done["environment"])
    report.save(out / f"{item.name}{REPORT_SUFFIX}")
    return _row(item, report.to_json(), "tuned")


def sweep(models: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str],
          target: str | None = "local", dims_sets: Sequence[dict[str, int]] = (),
          progress: Progress | None = None, cancel: Cancel = None, **settings: Any) -> SweepSummary:
    """Tune every model at every dims set (settings: TuneSettings fields, budget_s per item) into out_dir."""
    from fuseview.tuning.settings import TuneSettings

    kind, _address = parse_target(target)
    for m in models:
        if not Path(m).is_file():
            raise FuseviewError(f"{m}: no such model file")
    base = TuneSettings(**settings)
    base.check()
    out = _out_folder(out_dir)
    items = plan_items(models, dims_sets)
    rows: dict[str, SweepRow] = {}
    todo = []
    for it in items:
        done_before = _done_before(it, out, _fields(base, it))
        if done_before is not None:
            rows[it.name] = _row(it, done_before, "done before")
        else:
            for fname in (f"{it.name}.onnx", f"{it.name}{REPORT_SUFFIX}"):  # refused before any tuning
                check_output(out / fname)
            todo.append(it)
    # a ray: cluster is reached here: a failure one line within the item budget (or 30 s)
    runner = open_target(target, base.provider, base.budget_s) if todo or kind == "local" else None
    summary = SweepSummary(runner.describe() if runner is not None else {"kind": kind})
    if runner is not None and todo:
        by_name = {it.name: it for it in todo}
        if progress:
            progress(f"tuning {len(todo)} item(s)", 0.0)
        work = [(it.name, it.model, _fields(base, it)) for it in todo]
        outcomes = runner.tune_many(work, tune_item, out, 2 * base.budget_s + TASK_SLACK_S, cancel)
        for n, (name, res) in enumerate(outcomes):
            rows[name] = _outcome(by_name[name], res, out)
            if progress:
                progress(f"{name} finished ({n + 1} of {len(todo)})", (n + 1) / len(todo))
    summary.rows = [rows[it.name] for it in items]
    write_text_atomic(out / SUMMARY_JSON, json.dumps(summary.to_json(), indent=1, allow_nan=False) + "\n")
    write_text_atomic(out / SUMMARY_TEXT, summary.text() + "\n")
    return summary


def _outcome(it: SweepItem, res: dict[str, Any] | Exception, out: Path) -> SweepRow:
    """An item's row: written and tuned, or failed (named; a failed item leaves no model behind)."""
    if not isinstance(res, Exception):
        try:
            return _finish(it, res, out)
        except (FuseviewError, OSError, KeyError, TypeError, ValueError) as exc:  # a bad reply: that item
            res = exc
    _drop_model(out, it)
    return SweepRow(it.name, it.model, it.dims, f"failed: {_first_line(res)}")


def _fields(base: TuneSettings, it: SweepItem) -> dict[str, Any]:
    s = dataclasses.replace(base, dims={**base.dims, **it.dims})
    return {f.name: getattr(s, f.name) for f in dataclasses.fields(s)}


def _out_folder(out_dir: str | os.PathLike[str]) -> Path:
    """The output folder, made when missing; a file, link or folder fuseview cannot write refused."""
    out = Path(out_dir)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise FuseviewError(f"-o {out}: not a folder (a file or a link is there)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FuseviewError(f"-o {out}: cannot make the folder ({exc.strerror or exc})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise FuseviewError(f"-o {out}: the folder is not writable")
    return out


def _done_before(it: SweepItem, out: Path, fields: dict[str, Any]) -> dict[str, Any] | None:
    """The report of an item done by an earlier run with these settings; None when it must be (re)tuned
    (no report, one that is not a tune report, another model's, or one made at other dims or settings)."""
    from fuseview.reports.tune import TuneReport
    from fuseview.safe_io import load_json

    path = out / f"{it.name}{REPORT_SUFFIX}"
    if path.is_symlink() or not path.is_file():
        return None
    try:
        raw = load_json(path, "report", "JSON tune report")  # size-capped, one-line errors
        report = TuneReport.from_json(raw)
    except (OSError, ValueError, UnicodeDecodeError, FuseviewError, KeyError, TypeError, AttributeError):
        return None
    if not isinstance(report.model, str) or os.path.realpath(report.model) != os.path.realpath(it.model):
        return None
    config = report.config if isinstance(report.config, dict) else {}
    optional = {"ort_optimizer"}  # not every report writes it
    config = {"float16": False, **config}  # reports before --float16 tuned the model as it was
    # unset tolerances are the model's precision's, which the report holds resolved
    skip = {"dims"} | {k for k in ("atol", "rtol") if fields.get(k) is None}
    if any((k not in config and k not in optional) or (k in config and _plain(config[k]) != _plain(v))
           for k, v in fields.items() if k not in skip):
        return None
    dims = config.get("dims")  # the dims tuned at: those asked for, the model's defaults for the rest
    if not isinstance(dims, dict) or any(dims.get(k) != v for k, v in fields.get("dims", {}).items()):
        return None
    return raw if isinstance(raw, dict) else None


def _plain(v: Any) -> Any:
    return json.loads(json.dumps(v, default=str))


def _drop_model(out: Path, it: SweepItem) -> None:
    model = out / f"{it.name}.onnx"  # without its report it is no result: a rerun tunes the item again
    if model.is_file() and not model.is_symlink():
        model.unlink()


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
