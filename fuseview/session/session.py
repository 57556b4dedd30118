"""The application model under the window: the open model, navigation, scan, decisions, fused result,
reports and what each pane draws, with plain-Python events. The window's views draw from it; no Qt here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from fuseview.errors import FuseviewError
from fuseview.graph.document import ModelDocument
from fuseview.graph.groups import EXPANSION_MODES, Expansion, expansion_for
from fuseview.graph.lazy_weights import record_folder
from fuseview.graph.loader import load_document
from fuseview.graph.save import save_model_atomic
from fuseview.reports import FuseReport
from fuseview.session.decisions import Decisions
from fuseview.session.events import EmitterGroup
from fuseview.session.fusion_target import FusionSettings, at_precision, carry_decisions, switch_precision
from fuseview.session.jobs import JobHandle, JobService, Progress
from fuseview.session.links import Links, adopt_origin_scopes, link_graphs
from fuseview.session.ort_check import ort_check_fits
from fuseview.session.panes import Marks, PaneState
from fuseview.session.profile_settings import ProfileSettings

if TYPE_CHECKING:  # imported when used: onnxruntime loads only once a scan or Apply runs
    from fuseview.fusion.apply import ApplyResult
    from fuseview.fusion.scan import ScanResult
    from fuseview.fusion.validate import Validation
    from fuseview.graph.geometry import Layout
    from fuseview.runtime.job import ProfileRequest
    from fuseview.tuning.run import TuneResult
    from fuseview.tuning.settings import TuneSettings
    from fuseview.workflows.traces import OpenedTraces

ORIGINAL, FUSED = "original", "fused"
SESSION_EVENTS = (
    "document",  # a new model is open (everything derived from the last one was dropped): doc, laid
    "open_failed",  # opening or laying out a model failed: error, title (what failed, in words)
    "status",  # a line for the status bar: text, timeout_ms (0: until the next one)
    "dims",  # the input dims the scan, Apply and the profile use changed: dims
    "navigated",  # the document on screen changed (an inner graph opened, or back up)
    "relaid",  # Session.relayout laid the graph on screen out with another expansion: doc, laid
    "scanned",  # the scan of the open model is done: decisions exist
    "scan_failed",  # error
    "ort_checked",  # ort_does_it is known
    "ort_failed",  # error
    "decisions",  # a decision changed (accept, reject, undo, redo, plan opened)
    "applied",  # the fused result is built: fused, extra (what prepare returned)
    "apply_failed",  # error
    "heat",  # the heat map changed
    "profiled",  # a profile report arrived (Session.profile, or a report set from a file): report
    "profile_failed",  # Session.profile failed: error
    "profile_cancelled",  # Session.profile was cancelled
    "traces_opened",  # Session.open_traces read and compared the traces: traces (an OpenedTraces)
    "traces_failed",  # Session.open_traces failed: error
    "traces_cancelled",  # Session.open_traces was cancelled (not sent for one superseded by a newer one)
    "tuned",  # Session.tune ended (finished, or stopped with the best set so far); decisions set: result
    "tune_failed",  # Session.tune failed: error
    "tune_cancelled",  # Session.tune was cancelled (its result dropped: a new model, the window closing)
    "pane",  # a pane's overlay state changed: role, part (marks, focus, highlight, heat), state
    "profile_settings",  # the Profile dock's settings changed: settings (a ProfileSettings)
    "fusion_settings",  # the scan's provider or the precision changed: settings (a FusionSettings)
)


@dataclass
class NavEntry:
    """Where the user came from while an inner graph (If/Loop body, local function) is open."""

    label: str
    doc: ModelDocument
    expanded: Expansion


@dataclass
class FusedResult:
    """The fused model built from the accepted candidates, its document, checks and whether it is saved."""

    model: onnx.ModelProto
    doc: ModelDocument
    applied: set[str]
    validation: Validation | None
    notes: list[str]
    result: ApplyResult
    report: FuseReport | None = None  # what was applied, node counts, notes, validation
    expanded: Expansion = None  # the expansion its pane was laid out with
    saved: bool = False

    def validation_text(self) -> str:
        """'validated on onnxruntime: max |diff| …' or 'not validated'."""
        return "not validated" if self.validation is None else self.validation.headline()


@dataclass
class Laid:
    """A graph laid out off the UI thread: its expansion, the layout, and what the views add to it."""

    expanded: Expansion
    layout: Layout
    extras: Any = None  # Session.layout_extras(layout), e.g. the window's route paths


class Session:
    """Everything the window shows, as data: views read it, call its methods, and connect to its events."""

    def __init__(self, jobs: JobService | None = None, expansion_mode: str = "auto") -> None:
        self.jobs = jobs if jobs is not None else JobService()
        self.expansion_mode = expansion_mode if expansion_mode in EXPANSION_MODES else "auto"
        self.events = EmitterGroup(self, SESSION_EVENTS)
        self.root: ModelDocument | None = None  # the opened model's main graph
        self.doc: ModelDocument | None = None  # the graph on screen: root, or a body/function in it
        self.nav_stack: list[NavEntry] = []
        self.expanded: Expansion = None  # the open scopes of the graph on screen (None: flat)
        self.dims: dict[str, int] = {}  # the dims the scan uses; apply validates on them too
        self.fusion_settings = FusionSettings()  # the scan's provider and the precision fused
        self.converted_from: ModelDocument | None = None  # the float32 model of a float16 conversion
        self.profile_settings = ProfileSettings()  # how the Profile dock profiles (it edits them)
        self.scan_pending = False
        self.panes: dict[str, PaneState] = {ORIGINAL: PaneState(), FUSED: PaneState()}
        self.status = ""  # the last status line (the status event carries each one)
        # what the views compute beside each layout in the worker (the window: its Qt route paths)
        self.layout_extras: Callable[[Layout], Any] | None = None
        self.traces: OpenedTraces | None = None  # the traces on show (independent of the open model)
        self._traces_reads = 0  # how many Session.open_traces were asked for
        self._reset()

    def _reset(self) -> None:
        self.scan: ScanResult | None = None
        self.scan_seconds = 0.0
        self.scan_dims: dict[str, int] = {}
        self.scan_for: str | None = None  # the provider the scan offered fused ops for (None: any)
        self.decisions: Decisions | None = None
        self._saved_decisions: dict[str, str] = {}
        self.ort_does_it: dict[str, bool | None] | None = None
        self.fused: FusedResult | None = None
        self.links = Links()
        self.heat: dict[str, dict[str, float]] | None = None
        self.profile_report: dict[str, Any] | None = None  # the report on show
        self.tune_result: TuneResult | None = None  # the last tune of this model
        for pane in self.panes.values():
            pane.clear()

    # the document and navigation ------------------------------------------------------------------
    def initial_expansion(self, doc: ModelDocument) -> Expansion:
        """The expansion a newly shown document starts with, by the session's expansion mode."""
        return expansion_for(doc.graph, self.expansion_mode)

    def lay_out(self, doc: ModelDocument, expanded: Expansion, progress: Progress) -> Laid:
        """Lay doc's graph out with expanded (in a worker), with the views' extras."""
        from fuseview.graph.layout import layout_graph

        progress("laying out", 0.65)
        lay = layout_graph(doc.graph, expanded)
        progress("drawing", 0.9)
        return Laid(expanded, lay, self.layout_extras(lay) if self.layout_extras is not None else None)

    def open(self, source: str | os.PathLike[str] | ModelDocument) -> JobHandle:
        """Load a model file (or take a loaded document) and lay it out, as one job of kind 'layout'.

        When it is done the model is adopted (the document event carries the layout as laid); a failure is
        the open_failed event, and what was open stays open.
        """
        mode = self.expansion_mode
        name = source.path.name if isinstance(source, ModelDocument) and source.path else (
            "model" if isinstance(source, ModelDocument) else Path(source).name)
        title = f"Laying out {name}" if isinstance(source, ModelDocument) else f"Opening {name}"

        float16 = self.fusion_settings.float16

        def work(progress: Progress) -> tuple[ModelDocument, Laid, ModelDocument | None]:
            if isinstance(source, ModelDocument):
                doc = source
            else:
                doc = load_document(str(source), progress=lambda m, f: progress(m, 0.6 * f))
            doc, float32 = at_precision(doc, float16, progress)  # with float16: its conversion on show
            return doc, self.lay_out(doc, expansion_for(doc.graph, mode), progress), float32

        def failed(exc: BaseException) -> None:
            loaded = isinstance(source, ModelDocument)
            what = "Cannot lay out the graph" if loaded else "Cannot open the model"
            self.events.open_failed.emit(error=exc, title=what)

        def done(result: tuple[ModelDocument, Laid, ModelDocument | None]) -> None:
            doc, laid, float32 = result
            self.adopt(doc, laid.expanded, laid, source=float32)
            if self.fusion_settings.float16 != float16:  # switched while it loaded
                switch_precision(self)

        return self.jobs.submit(work, "layout", title, on_done=done, on_failed=failed)

    def relayout(self, expanded: Expansion) -> JobHandle | None:
        """Lay the graph on screen out again with another expansion, as the job of kind 'layout' (a newer
        request replaces it): relaid (doc, laid), or open_failed titled "Cannot lay out the graph"."""
        doc = self.doc
        if doc is None:
            return None

        def done(laid: Laid) -> None:
            if self.doc is doc:  # still the graph on screen (not an inner graph opened since)
                self.events.relaid.emit(doc=doc, laid=laid)

        return self.jobs.submit(
            lambda progress: self.lay_out(doc, expanded, progress), "layout", "Laying out", on_done=done,
            on_failed=lambda exc: self.events.open_failed.emit(error=exc, title="Cannot lay out the graph"))

    def adopt(self, doc: ModelDocument | None, expanded: Expansion = None, laid: Laid | None = None,
              source: ModelDocument | None = None, dims: dict[str, int] | None = None) -> None:
        """Make doc the open model: what was derived from the last one (scan, fused, heat) is dropped.
        source: the float32 model doc is the float16 conversion of; dims: those kept (same inputs)."""
        for kind in ("scan", "ort", "apply", "tune"):
            self.jobs.cancel(kind)  # their results belong to the model being replaced
        self._reset()
        self.root = self.doc = doc
        self.converted_from = source
        self.scan_pending = doc is not None  # the window starts it once the graph is on screen
        self.nav_stack = []
        self.expanded = expanded
        self.set_dims(dims or {})  # a model's dims keys are its own
        self.events.document.emit(doc=doc, laid=laid)

    def set_status(self, text: str, timeout_ms: int = 0) -> None:
        """Say something on the status line (every view writes status through here)."""
        self.status = text
        self.events.status.emit(text=text, timeout_ms=timeout_ms)

    def set_dims(self, dims: dict[str, int]) -> None:
        """The input dims the scan, Apply and the profile use (the Profile dock's dims box writes them)."""
        if dims != self.dims:
            self.dims = dict(dims)
            self.events.dims.emit(dims=dict(dims))

    def set_profile_settings(self, **changes: Any) -> None:
        """Change the Profile dock's settings (ProfileSettings fields); the profile_settings event says so."""
        settings = replace(self.profile_settings, **changes)
        if settings != self.profile_settings:
            self.profile_settings = settings
            self.events.profile_settings.emit(settings=settings)

    def set_fusion_settings(self, **changes: Any) -> JobHandle | None:
        """Change what the scan fuses for (FusionSettings fields; the fusion_settings event): another
        provider rescans the model on show (decisions kept for the candidates it still has), float16 shows
        the model's float16 conversion in its place (a layout job; off: back to the float32 model)."""
        settings = replace(self.fusion_settings, **changes)
        settings.check()
        old, self.fusion_settings = self.fusion_settings, settings
        if settings == old:
            return None
        self.events.fusion_settings.emit(settings=settings)
        if settings.float16 != old.float16:
            return switch_precision(self)
        return self.start_scan(carry=True) if self.root is not None and not self.scan_pending else None

    @property
    def provider(self) -> str | None:
        """The provider the scan offers fused ops for, 'cpu' / 'cuda' (None: any): fusion_settings'."""
        return self.fusion_settings.scan_provider()

    @provider.setter
    def provider(self, value: str | None) -> None:
        self.set_fusion_settings(provider=value or "any")

    @property
    def on_root(self) -> bool:
        """Whether the graph on screen is the open model's main graph."""
        return self.doc is not None and self.doc is self.root

    def enter(self, label: str, inner: ModelDocument) -> None:
        """Show an inner graph, remembering where we came from (navigated: doc, expanded to show it with)."""
        if self.doc is None:
            raise FuseviewError("no model open")
        self.nav_stack.append(NavEntry(label, self.doc, self.expanded))
        self.doc = inner
        self.events.navigated.emit(doc=inner, expanded=self.initial_expansion(inner))

    def go_up(self) -> NavEntry | None:
        """Back to the graph that holds the inner graph on screen; returns where we went, None at the top."""
        if not self.nav_stack:
            return None
        entry = self.nav_stack.pop()
        self.doc = entry.doc
        self.events.navigated.emit(doc=entry.doc, expanded=entry.expanded)
        return entry

    def path_labels(self) -> list[str]:
        """The breadcrumb: 'main' and one label per inner graph opened."""
        return ["main"] + [e.label for e in self.nav_stack]

    # scanning -------------------------------------------------------------------------------------
    def start_scan(self, carry: bool = False) -> JobHandle | None:
        """Scan the open model for fusion candidates in the background (kind 'scan'), with self.dims, for
        self.provider; carry: keep the decisions of the candidates the new scan still has."""
        doc = self.root
        self.scan_pending = False
        if doc is None:
            return None
        model, dims, provider = doc.model, dict(self.dims), self.provider
        path = doc.path

        def work(progress: Progress) -> tuple[ScanResult, float]:
            from fuseview.fusion.pipeline import scan_for_fusion

            progress("scanning for fusion candidates", 0.1)
            t0 = time.perf_counter()
            result = scan_for_fusion(model, dims or None, path, provider)
            return result, time.perf_counter() - t0

        def done(result: tuple[ScanResult, float]) -> None:
            if doc is self.root:
                old = self.decisions if carry else None
                self.scan_for = provider
                self._scanned(doc, *result, dims, old)

        def failed(exc: BaseException) -> None:
            if doc is self.root:
                self.events.scan_failed.emit(error=exc)

        return self.jobs.submit(work, "scan", "scan", on_done=done, on_failed=failed)

    def _scanned(self, doc: ModelDocument, scan: ScanResult, seconds: float, dims: dict[str, int],
                 old: Decisions | None) -> None:
        self.scan, self.scan_seconds, self.scan_dims = scan, seconds, dims
        self.decisions = Decisions(scan, str(doc.path) if doc.path else None)
        if old is not None:
            carry_decisions(old, self.decisions)
        self.decisions.events.changed.connect(lambda _e: self.events.decisions.emit())
        self._saved_decisions = self._decision_snapshot()
        self.events.scanned.emit(scan=scan)

    def start_ort_check(self) -> JobHandle | None:
        """In the background (kind 'ort'): which candidates onnxruntime's own optimizer fuses anyway."""
        doc, scan = self.root, self.scan
        if doc is None or scan is None:
            return None
        model, folder = doc.model, (doc.path.parent if doc.path else None)

        def work(progress: Progress) -> dict[str, bool | None]:
            from fuseview.fusion.ort_compare import compare_with_ort

            progress("sizing the weights onnxruntime would load", 0.05)
            ort_check_fits(model, folder, doc.path)
            progress("asking onnxruntime which fusions it makes itself", 0.1)
            return compare_with_ort(model, scan.candidates, "all", "cpu", base_dir=folder).does_it

        def done(does_it: dict[str, bool | None]) -> None:
            if scan is self.scan:
                self.ort_does_it = does_it
                self.events.ort_checked.emit(does_it=does_it)

        def failed(exc: BaseException) -> None:
            if scan is self.scan:
                self.events.ort_failed.emit(error=exc)

        return self.jobs.submit(work, "ort", "ort check", on_done=done, on_failed=failed)

    # decisions ------------------------------------------------------------------------------------
    def _need_decisions(self) -> Decisions:
        if self.decisions is None:
            raise FuseviewError("no candidates yet: open a model first")
        return self.decisions

    def accept(self, id_or_rule: str) -> bool:
        """Accept a candidate (its conflicts are rejected) or a whole rule; one undoable step."""
        return self._need_decisions().accept(id_or_rule)

    def reject(self, id_or_rule: str) -> bool:
        """Reject a candidate or a whole rule; one undoable step."""
        return self._need_decisions().reject(id_or_rule)

    def accept_all(self) -> bool:
        """Accept every undecided candidate."""
        return self._need_decisions().accept_all()

    def undo(self) -> bool:
        """Revert the last decision step."""
        return self._need_decisions().undo()

    def redo(self) -> bool:
        """Do the last undone decision step again."""
        return self._need_decisions().redo()

    def _decision_snapshot(self) -> dict[str, str]:
        return dict(self.decisions.plan.decisions) if self.decisions is not None else {}

    def decisions_saved(self) -> bool:
        """Whether the decisions are as last saved (or opened) as a plan."""
        return self._decision_snapshot() == self._saved_decisions

    # files ----------------------------------------------------------------------------------------
    def source_path(self) -> Path | None:
        """The open model's file, resolved (None for a model that came without one)."""
        doc = self.converted_from or self.root  # a float16 conversion's file is its float32 model's
        return Path(doc.path).resolve() if doc is not None and doc.path else None

    def _refuse_source(self, path: Path) -> None:
        src = self.source_path()
        if src is not None and path.resolve() == src:
            raise FuseviewError(f"{path}: that is the source model; choose another file")

    def save_fused(self, path: str | os.PathLike[str]) -> Path:
        """Write the fused model atomically (never over the source model)."""
        if self.fused is None:
            raise FuseviewError("nothing applied yet: accept candidates and Apply first")
        out = Path(path)
        self._refuse_source(out)
        if not out.resolve().parent.is_dir():
            raise FuseviewError(f"{out.parent}: no such folder")
        # weights left on disk (the source's, their folder recorded at apply) are streamed into the file
        save_model_atomic(self.fused.model, out)
        self.fused.saved = True
        return out

    def save_plan(self, path: str | os.PathLike[str]) -> Path:
        """Write the decisions as a plan JSON (atomic, never over the source model)."""
        decisions = self._need_decisions()
        out = Path(path)
        self._refuse_source(out)
        decisions.save(out)
        self._saved_decisions = self._decision_snapshot()
        return out

    def open_plan(self, path: str | os.PathLike[str]) -> list[str]:
        """Apply a plan's decisions by id (one undoable step); returns the ids this model lacks."""
        unknown = self._need_decisions().load(Path(path))
        self._saved_decisions = self._decision_snapshot()  # what is on screen is what the file says
        return unknown

    def unsaved(self) -> list[str]:
        """What would be lost now: 'N decisions' not saved as a plan, 'the fused model' not saved."""
        what = []
        if self.decisions is not None and not self.decisions_saved():
            n = len(self._decision_snapshot())
            what.append(f"{n} decision{'s' if n != 1 else ''}")
        if self.fused is not None and not self.fused.saved:
            what.append("the fused model")
        return what

    # apply ----------------------------------------------------------------------------------------
    def apply(self, dims: dict[str, int] | None = None, expanded: Expansion = None) -> JobHandle | None:
        """Build the fused model from the accepted candidates in the background (kind 'apply').

        The one pipeline `fuseview fuse` runs (same checks, validation, tolerances), validated on dims
        (default: the session's dims, else the scan's). The fused graph is laid out in the worker too
        (with expanded); the applied event carries the result and its layout as extra (a Laid), a failure
        is the apply_failed event. None when there is nothing accepted.
        """
        d, doc, scan = self.decisions, self.root, self.scan
        if d is None or doc is None or scan is None:
            return None
        ids = d.accepted()
        if not ids:
            return None
        model, original, path = doc.model, doc.graph, doc.path
        src, float32 = self.source_path(), self.converted_from  # a conversion: the floor is its float32
        base, reference = (src.parent if src else None), (float32.model if float32 else None)
        dims = dict(dims if dims is not None else (self.dims or self.scan_dims))

        def work(progress: Progress) -> tuple[FusedResult, Any]:
            from fuseview.fusion.pipeline import FuseOptions, build_fused
            from fuseview.graph.loader import document_from_model

            # the fused model keeps the source's big weights where they are, as `fuse` does: the window
            # holds a 622 MB model's fused variant in about 1 MB, the profile child and Save stream them
            options = FuseOptions(dims=dims, strict=False, weights_on_disk=True)
            outcome = build_fused(model, scan, ids, options, base, progress, reference)
            res = outcome.result
            if base is not None:
                record_folder(res.model, base)
            progress("laying out", 0.7)
            fdoc = document_from_model(res.model, types_from=original)  # the original tensors' types
            adopt_origin_scopes(original, fdoc.graph)
            fused = FusedResult(res.model, fdoc, {c.id for c in res.applied}, outcome.validation,
                                list(outcome.notes), res, FuseReport.of(model, scan, outcome, path), expanded)
            return fused, self.lay_out(fdoc, expanded, progress)

        def done(result: tuple[FusedResult, Laid]) -> None:
            if doc is self.root:
                self._applied(*result)

        def failed(exc: BaseException) -> None:
            self.events.apply_failed.emit(error=exc)

        return self.jobs.submit(work, "apply", "Applying", on_done=done, on_failed=failed)

    def _applied(self, fused: FusedResult, extra: Any) -> None:
        assert self.root is not None and self.decisions is not None
        self.decisions.applied = fused.applied
        self.links = link_graphs(self.root.graph, fused.doc.graph)
        self.fused = fused
        self.events.applied.emit(fused=fused, extra=extra)

    # reports and overlays -------------------------------------------------------------------------
    def set_heat(self, values: dict[str, dict[str, float]] | None) -> None:
        """Colour the panes by each node's share of time ({'original': {name: share}, 'fused': …})."""
        self.heat = values
        self.events.heat.emit(heat=values)

    def profile(self, request: ProfileRequest, target: str = "local") -> JobHandle:
        """Profile as the job of kind 'profile': locally in a child process (Cancel kills it), or on a
        Ray target ("ray:ADDRESS") as one task on one node (Cancel cancels the task).

        The report arrives as the profiled event (and self.profile_report); a failure as profile_failed."""
        from fuseview.session.profile_run import profile_in_child

        def failed(exc: BaseException) -> None:
            self.events.profile_failed.emit(error=exc)

        def on_target(progress: Any) -> dict[str, Any]:
            from fuseview.progress import steps_of
            from fuseview.targets import open_profile_target

            where = open_profile_target(target, request)  # the connect bounded by the budget
            report: dict[str, Any] = where.profile(request, steps_of(progress), lambda: progress.cancelled)
            return report

        work = (lambda progress: profile_in_child(request, progress)) if target == "local" else on_target
        return self.jobs.submit(work, "profile", "Profiling",
                                on_done=self.set_profile, on_failed=failed,
                                on_cancelled=lambda: self.events.profile_cancelled.emit())

    def set_profile(self, report: dict[str, Any] | None) -> None:
        """The profile report on show (from a run or a file)."""
        self.profile_report = report
        self.events.profiled.emit(report=report)

    def open_traces(self, paths: Sequence[str | os.PathLike[str]], steps: int | None = None,
                    provenance: str | os.PathLike[str] | None = None) -> JobHandle:
        """Read one or two traces (or one capture folder) and compare them as the job of kind 'traces'
        (workflows.traces.open_traces, as `fuseview trace`): traces_opened, traces_failed or
        traces_cancelled."""
        from fuseview.workflows.traces import open_traces

        names = [os.fspath(p) for p in paths]
        prov = os.fspath(provenance) if provenance is not None else None

        def work(progress: Progress) -> OpenedTraces:
            # a capture with its model.onnx: its nodes are profiled too, for the join's onnxruntime columns
            return open_traces(names, steps, prov, progress, timelines=True, join=True, ort_time=True)

        def done(opened: OpenedTraces) -> None:
            self.traces = opened
            self.events.traces_opened.emit(traces=opened)

        self._traces_reads += 1  # counted before the submit supersedes the older read
        read = self._traces_reads

        def cancelled() -> None:
            if read == self._traces_reads:  # not superseded: a newer read's events follow
                self.events.traces_cancelled.emit()

        title = "Reading " + " and ".join(Path(p).name for p in names)
        return self.jobs.submit(work, "traces", title, on_done=done,
                                on_failed=lambda exc: self.events.traces_failed.emit(error=exc),
                                on_cancelled=cancelled)

    def tune(self, settings: TuneSettings, target: str = "local") -> JobHandle | None:
        """Tune the open model as the job of kind 'tune' (workflows.tune.tune, as `fuseview tune`) on `target`
        ("local" or "ray:ADDRESS"); None before a scan (session.tune_job says what is tuned and how). The
        job's stop() ends the search with the best set so far; cancel() drops it. The chosen decisions are
        set (one undoable step), then tuned."""
        from fuseview.session.tune_job import tune_job

        return tune_job(self, settings, target)

    # what each pane draws over its graph: the views draw the pane event's part of panes[role]
    def _pane_changed(self, role: str, part: str) -> None:
        self.events.pane.emit(role=role, part=part, state=self.panes[role])

    def set_marks(self, role: str, marks: Marks) -> None:
        """The candidate outlines a pane draws (box key -> colour, faded, badges)."""
        self.panes[role].marks = marks
        self._pane_changed(role, "marks")

    def set_focus(self, role: str, keys: list[str]) -> None:
        """The boxes of the candidate being looked at (dashed outline)."""
        self.panes[role].focus = list(keys)
        self._pane_changed(role, "focus")

    def set_highlight(self, role: str, keys: list[str] | set[str]) -> None:
        """The boxes an op-type search highlights."""
        self.panes[role].highlight = set(keys)
        self._pane_changed(role, "highlight")

    def set_pane_heat(self, role: str, values: dict[str, float] | None) -> None:
        """Share of time per box key (None: heat map off)."""
        self.panes[role].heat = None if values is None else dict(values)
        self._pane_changed(role, "heat")

    def set_selection(self, role: str, keys: list[str]) -> None:
        """What the user picked in a pane (the view reports it; no event: the view drew it already)."""
        self.panes[role].selection = list(keys)


__all__ = ["FUSED", "ORIGINAL", "FusedResult", "Laid", "NavEntry", "Session"]
