"""What the window fuses for, held by the Session as `fusion_settings`: the target provider of its scan (and
of tune's scan), and the precision: with float16 the model's float16 conversion (onnxruntime's converter, I/O
types kept, `fuse --float16`'s own) is shown, scanned, applied, profiled and tuned in the model's place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fuseview.errors import FuseviewError
from fuseview.graph.document import ModelDocument
from fuseview.graph.groups import expansion_for

if TYPE_CHECKING:
    from fuseview.session.decisions import Decisions
    from fuseview.session.jobs import JobHandle, Progress

# `session` below is a fuseview.session.Session, whose module imports this one (no cycle between siblings)

# any: every fused op offered (no kernel table); auto: cuda when onnxruntime has CUDAExecutionProvider
PROVIDERS = ("any", "auto", "cpu", "cuda")
FLOAT16_FAILED = "Cannot convert the model to float16"


@dataclass(frozen=True)
class FusionSettings:
    """The provider the scan offers fused ops for, and whether the float16 conversion is fused."""

    provider: str = "any"
    float16: bool = False

    def check(self) -> None:
        """FuseviewError naming a provider the scan does not know."""
        if self.provider not in PROVIDERS:
            raise FuseviewError(f"provider {self.provider!r}: use {', '.join(PROVIDERS)}")

    def scan_provider(self) -> str | None:
        """'cpu' / 'cuda' for the scan's kernel table (auto resolved as `fuseview scan` does); None: any."""
        if self.provider == "any":
            return None
        if self.provider == "auto":
            from fuseview.fusion.kernels import default_provider

            return default_provider()[0]
        return self.provider


def is_float16(doc: ModelDocument) -> bool:
    """Whether the document's model is float16 already (most of its float weights)."""
    from fuseview.precision import precision

    return precision(doc.model) == "float16"


def converted(doc: ModelDocument, progress: Progress) -> ModelDocument:
    """The float16 conversion of doc's model as a document of its own (held in memory: no path)."""
    from fuseview.fusion.pipeline import FuseOptions, prepare
    from fuseview.graph.loader import document_from_model

    progress("converting to float16", 0.1)
    model, _ = prepare(doc.model, FuseOptions(float16=True), doc.path.parent if doc.path else None)
    return document_from_model(model, None, progress=lambda m, f: progress(m, 0.3 + 0.3 * f))


def at_precision(doc: ModelDocument, float16: bool, progress: Progress) -> tuple[ModelDocument,
                                                                               ModelDocument | None]:
    """(the document to show, the float32 one it was converted from or None)."""
    if not float16 or is_float16(doc):
        return doc, None
    return converted(doc, progress), doc


def switch_precision(session: Any) -> JobHandle | None:
    """Show the open model at the session's precision, as the job of kind 'layout': the float16 conversion
    of the model on show, or back to the float32 model it was converted from. Dims are kept (the conversion
    keeps the inputs); a failed conversion turns float16 off again and is the open_failed event."""
    float16 = session.fusion_settings.float16
    source = session.converted_from
    if session.root is None or (float16 and (source is not None or is_float16(session.root))) or (
            not float16 and source is None):
        return None  # nothing to convert: a float16 model is fused as it is
    model = session.root if float16 else source
    assert model is not None
    dims, shown = dict(session.dims), session.root

    def work(progress: Progress) -> tuple[ModelDocument, Any]:
        doc = converted(model, progress) if float16 else model
        return doc, session.lay_out(doc, expansion_for(doc.graph, session.expansion_mode), progress)

    def done(result: tuple[ModelDocument, Any]) -> None:
        doc, laid = result
        if session.fusion_settings.float16 != float16 or session.root is not shown:
            return  # switched back, or another model opened, while it ran
        session.adopt(doc, laid.expanded, laid, source=model if float16 else None, dims=dims)

    def failed(exc: BaseException) -> None:
        session.set_fusion_settings(float16=False)
        session.events.open_failed.emit(error=exc, title=FLOAT16_FAILED)

    title = "Converting to float16" if float16 else "Back to the float32 model"
    job: JobHandle = session.jobs.submit(work, "layout", title, on_done=done, on_failed=failed)
    return job


def carry_decisions(old: Decisions, new: Decisions) -> None:
    """A rescan's decisions (another provider): the old ones of the candidates it still has, as one step."""
    kept = {cid: d for cid, d in old.plan.decisions.items() if cid in new.by_id}
    if kept:
        new.set_many(dict(kept))
    new.applied = {cid for cid in old.applied if cid in new.by_id}


def label(session: Any) -> str:
    """The model on show for a title: 'model.onnx', 'model.onnx (float16 conversion)', or ''."""
    path = session.source_path()
    name = path.name if path is not None else ""
    return f"{name or 'model'} (float16 conversion)" if session.converted_from is not None else name


def precision_label(session: Any) -> str:
    """The precision the session's Apply, tune and profile measure, with its output-check tolerances."""
    from fuseview.precision import TOLERANCES, precision

    if session.root is None:
        return ""
    kind = precision(session.root.model)
    atol, rtol = TOLERANCES[kind]
    how = ("the float32 model's conversion, I/O types kept: as `tune --float16`"
           if session.converted_from is not None else "the model as opened")
    return f"{kind} ({how}; outputs checked at atol {atol:g}, rtol {rtol:g})"
