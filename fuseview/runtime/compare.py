"""Compare two models (original and fused) on the same feeds: output errors, per-fusion errors and times."""

from __future__ import annotations

import math

import numpy as np
import onnx

from fuseview.defaults import ATOL, RTOL
from fuseview.errors import FuseviewError
from fuseview.naming import unique_node_names
from fuseview.progress import StepProgress
from fuseview.runtime.inputs import input_specs
from fuseview.runtime.profiling import Cancel, check_cancel, fusion_groups, load_model_graph
from fuseview.runtime.sessions import ModelSource, create_session

# |diff| histogram bins: one per decade from 1e-12 to 1e2; values outside go to the end bins, zeros apart.
HIST_EDGES = [10.0**e for e in range(-12, 3)]


def diff_histogram(d: np.ndarray) -> dict:
    """Counts of element-wise |diff| per decade (edges 1e-12..1e2, end bins open) plus a zero bin."""
    d = np.asarray(d, dtype=np.float64).ravel()
    zero = d == 0
    nonzero = d[~zero]
    top = len(HIST_EDGES) - 2
    idx = (np.clip(np.floor(np.log10(nonzero)), -12, -12 + top) + 12).astype(np.int64)
    counts = np.bincount(idx, minlength=len(HIST_EDGES) - 1)
    return {"zero": int(zero.sum()), "edges": list(HIST_EDGES), "counts": [int(c) for c in counts]}


def tensor_diff(ref: np.ndarray, got: np.ndarray, atol: float, rtol: float) -> dict:
    """max abs, max rel (|diff| / max(|ref|, atol)), mean abs, cosine, pass (|diff| <= atol + rtol|ref|)."""
    out: dict = {"shape": [int(x) for x in ref.shape], "dtype": str(ref.dtype)}
    if ref.shape != got.shape:
        return {**out, "other_shape": [int(x) for x in got.shape], "passed": False,
                "max_abs": None, "max_rel": None, "mean_abs": None, "cosine": None,
                "note": "shapes differ"}
    if not (np.issubdtype(ref.dtype, np.number) or ref.dtype == np.bool_):
        same = bool(np.array_equal(ref, got))
        return {**out, "passed": same, "max_abs": None, "max_rel": None, "mean_abs": None, "cosine": None}
    # in chunks: a 128 x 50257 logits output in float64 is 51 MB a copy, and the measures take several
    acc = _DiffSums()
    flat_ref, flat_got = ref.reshape(-1), got.reshape(-1)
    for start in range(0, max(flat_ref.size, 1), _DIFF_CHUNK):
        acc.add(flat_ref[start:start + _DIFF_CHUNK], flat_got[start:start + _DIFF_CHUNK], atol, rtol)
    nan_mismatch = acc.nan_mismatch
    if acc.count == 0:
        return {**out, "passed": not nan_mismatch, "max_abs": 0.0, "max_rel": 0.0, "mean_abs": 0.0,
                "cosine": 1.0, "nan_mismatch": nan_mismatch}
    with np.errstate(over="ignore", invalid="ignore"):
        na, nb = math.sqrt(acc.aa), math.sqrt(acc.bb)
        cos = 1.0 if na == 0 and nb == 0 else (acc.ab / (na * nb) if na and nb else 0.0)
    cosine = cos if np.isfinite(cos) else None
    passed = (not nan_mismatch) and acc.within
    hist = {"zero": acc.zero, "edges": list(HIST_EDGES), "counts": [int(c) for c in acc.counts]}
    return {**out, "passed": passed, "max_abs": acc.max_abs, "max_rel": acc.max_rel,
            "mean_abs": acc.sum_abs / acc.count, "cosine": cosine, "worst_ref": acc.worst[0],
            "worst_got": acc.worst[1], "nan_mismatch": nan_mismatch, "abs_diff_hist": hist}


_DIFF_CHUNK = 1 << 20


class _DiffSums:
    """Running measures of tensor_diff over chunks of the two tensors (float64, finite pairs only)."""

    def __init__(self) -> None:
        self.count = 0
        self.nan_mismatch = False
        self.within = True
        self.max_abs = self.max_rel = -math.inf
        self.worst = (0.0, 0.0)
        self.sum_abs = self.aa = self.bb = self.ab = 0.0
        self.zero = 0
        self.counts = np.zeros(len(HIST_EDGES) - 1, np.int64)

    def add(self, ref: np.ndarray, got: np.ndarray, atol: float, rtol: float) -> None:
        """Fold one chunk in."""
        a = ref.astype(np.float64)
        b = got.astype(np.float64)
        fin_a, fin_b = np.isfinite(a), np.isfinite(b)
        # NaN must meet NaN and an infinity the same infinity; only finite pairs are measured
        same_nonfinite = (np.isnan(a) & np.isnan(b)) | (a == b)
        self.nan_mismatch |= bool(((~fin_a | ~fin_b) & ~same_nonfinite).any())
        ok = fin_a & fin_b
        a, b = a[ok], b[ok]
        if a.size == 0:
            return
        self.count += a.size
        with np.errstate(over="ignore", invalid="ignore"):  # huge finite values may overflow to inf here
            d = np.abs(a - b)
            # Relative to |ref|, but never to less than atol: below it the pass test is absolute, and a
            # reference of 1e-9 would turn a harmless 3e-7 difference into "max rel 300".
            rel = d / np.maximum(np.abs(a), max(atol, 1e-12))
            self.aa += float(a @ a)
            self.bb += float(b @ b)
            self.ab += float(a @ b)
        self.within = self.within and bool(np.all(d <= atol + rtol * np.abs(a)))
        k = int(np.argmax(d))
        if d[k] > self.max_abs:
            self.max_abs, self.worst = float(d[k]), (float(a[k]), float(b[k]))
        self.max_rel = max(self.max_rel, float(rel.max()))
        self.sum_abs += float(d.sum())
        h = diff_histogram(d)
        self.zero += h["zero"]
        self.counts += np.asarray(h["counts"], np.int64)


def tensor_diffs(names: list[str], ref: list[np.ndarray], got: list[np.ndarray], atol: float = ATOL,
                 rtol: float = RTOL) -> dict[str, dict]:
    """tensor_diff of each named output (got against the reference ref)."""
    return {name: tensor_diff(x, y, atol, rtol) for name, x, y in zip(names, ref, got, strict=True)}


def _signature(model: onnx.ModelProto) -> tuple[list[str], list[str]]:
    return [s.name for s in input_specs(model)], [o.name for o in model.graph.output]


def check_same_signature(a: onnx.ModelProto, b: onnx.ModelProto) -> None:
    """FuseviewError unless both models have the same input and output names."""
    (ia, oa), (ib, ob) = _signature(a), _signature(b)
    if sorted(ia) != sorted(ib):
        raise FuseviewError(f"the models' inputs differ: {', '.join(ia)} vs {', '.join(ib)}")
    if sorted(oa) != sorted(ob):
        raise FuseviewError(f"the models' outputs differ: {', '.join(oa)} vs {', '.join(ob)}")


def _produced(model: onnx.ModelProto) -> set[str]:
    return {o for n in model.graph.node for o in n.output if o}


def _value_types(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # custom-domain ops or partial models: keep what the file says
        inferred = model
    g = inferred.graph
    out = {}
    for vi in list(g.value_info) + list(g.output) + list(g.input):
        if vi.type.tensor_type.elem_type:
            out[vi.name] = vi
    return out


def with_outputs(
    model: onnx.ModelProto, names: list[str], types: dict[str, onnx.ValueInfoProto]
) -> onnx.ModelProto:
    """A copy of the model whose graph also outputs the named tensors (the source model is left alone)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    have = {o.name for o in copy.graph.output}
    for name in names:
        if name in have:
            continue
        vi = types.get(name)
        if vi is not None:
            new = copy.graph.output.add()
            new.CopyFrom(vi)
            new.type.tensor_type.ClearField("shape")  # shapes of intermediates may be symbolic or wrong
        else:
            copy.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    return copy


def _full(model: ModelSource) -> onnx.ModelProto:
    """The model as a proto, by the one loader (big weights left on disk, side files' folder recorded)."""
    if isinstance(model, onnx.ModelProto):
        return model
    from fuseview.graph.loader import read_model_anywhere

    return read_model_anywhere(model)


def compare_outputs(
    original: ModelSource,
    fused: ModelSource,
    feeds: dict[str, np.ndarray],
    provider: str = "auto",
    opt_level: str = "disabled",
    atol: float = 1e-4,
    rtol: float = 1e-3,
    progress: StepProgress | None = None,
    cancel: Cancel = None,
) -> dict:
    """Errors of the fused model against the original: per output, and per fusion at its output tensors."""
    a, b = _full(original), _full(fused)
    check_same_signature(a, b)
    shared = _produced(a)
    fused_nodes = fusion_groups(b)
    extra: list[str] = []
    for f in fused_nodes:
        # A fusion's internal tensors are new; those it shares with the original are its checkable outputs.
        f["compared"] = [o for o in f["outputs"] if o in shared]
        extra += [o for o in f["compared"] if o not in extra]
    outputs = [o.name for o in a.graph.output]
    if extra:
        types = {**_value_types(b), **_value_types(a)}
        a, b = with_outputs(a, extra, types), with_outputs(b, extra, types)
    results = []
    for i, m in enumerate((a, b)):
        check_cancel(cancel)
        sess, choice = create_session(m, provider, opt_level, tf32=False)  # float32 verdicts
        names = outputs + [x for x in extra if x not in outputs]
        try:
            vals = sess.run(names, feeds)
        except Exception as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            which = "fused" if i else "original"
            raise FuseviewError(f"onnxruntime failed to run the {which} model: {msg}") from None
        results.append(dict(zip(names, vals, strict=True)))
        if progress:
            progress("compare", i + 1, 2)
    ref, got = results
    per_output = tensor_diffs(outputs, [ref[o] for o in outputs], [got[o] for o in outputs], atol, rtol)
    for f in fused_nodes:
        f["errors"] = {t: tensor_diff(ref[t], got[t], atol, rtol) for t in f["compared"]}
        f["passed"] = all(e["passed"] for e in f["errors"].values()) if f["errors"] else None
    return {
        "atol": atol,
        "rtol": rtol,
        "provider": choice.to_dict(),
        "outputs": per_output,
        "passed": all(d["passed"] for d in per_output.values()),
        "fusions": fused_nodes,
    }


def fusion_times(
    fused: ModelSource, original: ModelSource, prof_original: dict, prof_fused: dict
) -> list[dict]:
    """For each fusion: summed mean time of its fused nodes against that of the original nodes it replaced."""
    b = load_model_graph(fused)
    a = load_model_graph(original)
    a_names = unique_node_names(a.graph.node)
    constants = {nm for n, nm in zip(a.graph.node, a_names, strict=True) if n.op_type == "Constant"}
    t_a = {n["name"]: n["mean_us"] for n in prof_original.get("nodes", [])}
    p50_a = {n["name"]: n["p50_us"] for n in prof_original.get("nodes", [])}
    t_b = {n["name"]: n for n in prof_fused.get("nodes", [])}
    out = []
    for g in fusion_groups(b):
        timed = [o for o in g["origin"] if o in t_a]
        # Constant nodes become initializers in onnxruntime: they never run, so they cost nothing.
        missing = [o for o in g["origin"] if o not in t_a and o not in constants]
        orig_us = float(sum(t_a[o] for o in timed))
        ran = [t_b[n] for n in g["nodes"] if n in t_b]
        fused_us = float(sum(n["mean_us"] for n in ran)) if ran else None
        main = t_b.get(g["node"])
        fused_p50 = float(sum(n["p50_us"] for n in ran)) if ran else None
        orig_p50 = float(sum(p50_a[o] for o in timed))
        out.append({
            "key": g["key"],
            "node": g["node"],
            "op_type": g["op_type"],
            "provider": main["provider"] if main else None,
            "fused_nodes": len(g["nodes"]),
            "fused_timed": len(ran),
            "fused_us": fused_us,
            "original_us": orig_us,
            "original_nodes": len(g["origin"]),
            "original_timed": len(timed),
            "missing": missing,
            "speedup": (orig_us / fused_us) if fused_us else None,
            # sums of per-node medians: steadier than means on a busy machine
            "fused_p50_us": fused_p50,
            "original_p50_us": orig_p50,
            "speedup_p50": (orig_p50 / fused_p50) if fused_p50 else None,
        })
    out.sort(key=lambda d: -(d["original_p50_us"] or 0))  # by the median, as everywhere (fuseview.stats)
    return out
