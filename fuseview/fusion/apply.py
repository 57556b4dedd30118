"""Apply accepted candidates: a pure function (model, accepted ids) -> new ModelProto with provenance."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnx.version_converter
from onnx import numpy_helper

from fuseview.errors import FuseviewError
from fuseview.fusion.rule import Candidate, Replacement
from fuseview.fusion.scan import ScanResult, scan_model
from fuseview.fusion.subgraphs import write_back
from fuseview.graph.lazy_weights import has_disk_weights, stage_for_checker
from fuseview.provenance import CANDIDATE_KEY, ORIGIN_KEY, RULE_KEY

# onnxruntime registers these in the ONNX domain for every opset (contrib kernels) although the ONNX
# schema set has no such op at that opset; the checker's "No Op registered" for them is expected.
ORT_ONNX_DOMAIN_CONTRIB = frozenset({"SimplifiedLayerNormalization", "LayerNormalization"})
# ONNX-standard equivalents of those (same inputs and attributes, one output): emitted instead only when the
# user asks for an opset that has them (--target-opset), so the fused model passes onnx's full checker.
ONNX_STANDARD_FORM = {"SimplifiedLayerNormalization": "RMSNormalization"}


@dataclass
class ApplyResult:
    """The fused model, what was applied, and the reference-only ops it holds."""

    model: onnx.ModelProto
    applied: list[Candidate]
    reference_only_ops: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def stable_toposort(nodes: list[onnx.NodeProto], available: set[str]) -> list[onnx.NodeProto]:
    """Topological order that keeps the given order wherever it is already valid."""
    from fuseview.fusion.graphindex import has_subgraph, subgraph_inputs

    producers: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if o:
                producers[o] = i
    deps: list[set[int]] = []
    for i, n in enumerate(nodes):
        names = set(n.input) | (subgraph_inputs(n) if has_subgraph(n) else set())
        deps.append({producers[x] for x in names if x and x in producers and producers[x] != i})
    users: dict[int, list[int]] = {}
    for i, d in enumerate(deps):
        for j in d:
            users.setdefault(j, []).append(i)
    import heapq

    remaining = [len(d) for d in deps]
    heap = [i for i, r in enumerate(remaining) if r == 0]
    heapq.heapify(heap)
    out: list[int] = []
    while heap:
        i = heapq.heappop(heap)
        out.append(i)
        for u in users.get(i, ()):
            remaining[u] -= 1
            if remaining[u] == 0:
                heapq.heappush(heap, u)
    if len(out) != len(nodes):
        raise FuseviewError("the fused graph has a cycle (a rule produced an invalid replacement)")
    return [nodes[i] for i in out]


def _unique(name: str, taken: set[str]) -> str:
    base, k = name, 1
    while name in taken:
        name = f"{base}_{k}"
        k += 1
    taken.add(name)
    return name


def _attr_value(v):
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def apply_candidates(
    model: onnx.ModelProto, scan: ScanResult, accepted: Iterable[str], target_opset: int | None = None
) -> ApplyResult:
    """New model with the accepted candidates (ids from a scan of this model) fused; input untouched.

    The fused model keeps the source's ONNX opset (fused ops are onnxruntime contrib ops where the opset
    lacks a standard one); target_opset N converts the model to opset N (onnx's version converter where an
    op's meaning changes) and writes the standard forms N has, e.g. RMSNormalization from 23."""
    accepted = list(accepted)
    inner_ids = {c.id for _inner, sub in scan.inner for c in sub.candidates}
    res = _apply_main(model, scan, [cid for cid in accepted if cid not in inner_ids], target_opset)
    chosen_inner = [cid for cid in accepted if cid in inner_ids]
    if chosen_inner:
        _apply_inner(res, scan, set(chosen_inner))
    return res


def _apply_inner(res: ApplyResult, scan: ScanResult, accepted: set[str]) -> None:
    """Fuse the accepted candidates of each inner graph in its stand-alone model and write it back."""
    onnx_before = next((o.version for o in res.model.opset_import if o.domain in ("", "ai.onnx")), None)
    for inner, sub in scan.inner:
        ids = [c.id for c in sub.candidates if c.id in accepted]
        if not ids:
            continue
        fused = apply_candidates(inner.model, sub, ids)
        write_back(res.model, inner, fused.model)
        res.applied.extend(fused.applied)
        res.reference_only_ops = sorted(set(res.reference_only_ops) | set(fused.reference_only_ops))
        res.notes.extend(f"{inner.where.label}: {n}" for n in fused.notes)
        need = next((o.version for o in fused.model.opset_import if o.domain in ("", "ai.onnx")), None)
        if onnx_before is not None and need is not None and need > onnx_before:
            res.notes.append(
                f"{inner.where.label}: its fused ops need ONNX opset {need}; the model keeps {onnx_before}"
            )


def _apply_main(
    model: onnx.ModelProto, scan: ScanResult, accepted: Iterable[str], target_opset: int | None = None
) -> ApplyResult:
    chosen = _chosen(scan, accepted)
    opset = target_opset or next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    made = _replacements(model, scan, chosen, opset)
    chosen = [c for c in chosen if c.id not in made.skipped]
    nodes, used_names = _without_dead(model, scan, made)
    out = _rebuilt(model, nodes, used_names, made)
    _standard_forms(out, [n for ns in made.new_nodes_at.values() for n in ns], target_opset, made.notes)
    if made.ref_ops:
        ops = ", ".join(sorted(made.ref_ops))
        made.notes.append(f"reference-only ops (onnxruntime cannot run them): {ops}")
    return ApplyResult(out, chosen, sorted(made.ref_ops), made.notes)


@dataclass
class _Made:
    """What the accepted candidates' replacements add and take away."""

    remove: set[int] = field(default_factory=set)  # id() of the matched nodes
    new_nodes_at: dict[int, list[onnx.NodeProto]] = field(default_factory=dict)  # by the root's position
    new_inits: list[onnx.TensorProto] = field(default_factory=list)
    domains: dict[str, int] = field(default_factory=dict)
    ref_ops: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    skipped: set[str] = field(default_factory=set)  # candidates whose ops need a later opset


def _chosen(scan: ScanResult, accepted: Iterable[str]) -> list[Candidate]:
    """The accepted candidates of this scan; FuseviewError for an unknown id or two sharing a node."""
    by_id = scan.by_id()
    chosen: list[Candidate] = []
    used: dict[str, str] = {}
    for cid in accepted:
        c = by_id.get(cid)
        if c is None:
            raise FuseviewError(
                f"candidate {cid} is not in this model (scan it again: ids follow node names)"
            )
        clash = next((n for n in c.nodes if n in used), None)
        if clash is not None:
            raise FuseviewError(f"candidates {used[clash]} and {cid} both fuse node {clash}: accept only one")
        for n in c.nodes:
            used[n] = cid
        chosen.append(c)
    return chosen


def _replacements(model: onnx.ModelProto, scan: ScanResult, chosen: list[Candidate], opset: int) -> _Made:
    """Each chosen candidate's replacement nodes and initializers (one whose ops the opset lacks: skipped)."""
    index = scan.index
    made = _Made()
    taken = {n.name for n in index.nodes if n.name} | {t.name for t in model.graph.initializer}
    for c in chosen:
        m = c.match
        assert m is not None, c.id  # chosen candidates come from this scan and carry their match
        rule = m.rule
        assert rule.replace is not None, rule.name  # rules without a replacement never make candidates
        reps = rule.replace(m)
        reps = reps if isinstance(reps, list) else [reps]
        lacking = _lacking_ops(rule, reps, opset)
        if lacking:  # offered only with --target-opset: the model keeps its opset unless asked
            first = _first_opset(lacking)
            made.notes.append(f"{c.id}: not applied, {', '.join(lacking)} needs ONNX opset {first} and the"
                              f" model keeps opset {opset} (--target-opset {first} applies it)")
            made.skipped.add(c.id)
            continue
        matched = m.node_list
        root_pos = index.position(matched[-1])
        made.remove.update(id(n) for n in matched)
        origin = json.dumps([index.name(n) for n in matched])
        for rep in reps:
            assert isinstance(rep, Replacement)
            for name, arr in rep.initializers.items():
                made.new_inits.append(numpy_helper.from_array(np.asarray(arr), name))
                taken.add(name)
            op = rule.fused_op if rep.op is None else rep.op
            if op == "":
                continue
            domain = rule.domain if rep.domain is None else rep.domain
            outputs = list(rep.outputs) if rep.outputs is not None else list(m.outputs)
            root_name = index.name(matched[-1])
            base = (
                re.sub(r"[^/]*$", "", root_name) + f"{op}_fused" if "/" in root_name else f"{root_name}_{op}"
            )
            node = onnx.helper.make_node(
                op,
                list(rep.inputs),
                outputs,
                name=_unique(base, taken),
                domain=domain,
                **{k2: _attr_value(v) for k2, v in rep.attrs.items()},
            )
            for key, value in ((ORIGIN_KEY, origin), (RULE_KEY, rule.name), (CANDIDATE_KEY, c.id)):
                e = node.metadata_props.add()
                e.key, e.value = key, value
            if domain:
                made.domains[domain] = 1
            if rule.reference_only:
                made.ref_ops.add(f"{domain}:{op}")
            made.new_nodes_at.setdefault(root_pos, []).append(node)
    return made


def _without_dead(model: onnx.ModelProto, scan: ScanResult, made: _Made
                  ) -> tuple[list[onnx.NodeProto], set[str]]:
    """(nodes, the names they read): the replacements in place of the matched nodes, what a fusion left
    unread dropped, in a stable topological order."""
    from fuseview.fusion.graphindex import has_subgraph, subgraph_inputs
    from fuseview.fusion.shared_work import equal_initializers, merge_shared_work

    index = scan.index
    keep_ids = {id(n) for ns in made.new_nodes_at.values() for n in ns}
    # Nodes that were already dead in the source stay: removing them is not what the user accepted.
    src_used = {i for n in index.nodes for i in n.input} | {o.name for o in model.graph.output}
    orig_dead = {id(n) for n in index.nodes if not any(o in src_used for o in n.output if o)}
    nodes: list[onnx.NodeProto] = []
    for i, n in enumerate(index.nodes):
        if id(n) not in made.remove:
            nodes.append(n)
        nodes.extend(made.new_nodes_at.get(i, ()))
    # Drop Constant nodes and initializers nobody reads any more (a fusion absorbed their only consumer).
    graph_outputs = {o.name for o in model.graph.output}
    while True:
        used_names = {i for n in nodes for i in n.input} | graph_outputs
        for n in nodes:
            if has_subgraph(n):
                used_names |= subgraph_inputs(n)
        # Any ONNX op is a pure function: once a fusion absorbed its only reader (e.g. the Shape/Gather/
        # Concat chain that fed a Reshape), it is dead code.
        dead = [
            n
            for n in nodes
            if n.domain in ("", "ai.onnx")
            and id(n) not in keep_ids
            and id(n) not in orig_dead
            and not any(o in used_names for o in n.output if o)
        ]
        if not dead:
            break
        dead_ids = {id(n) for n in dead}
        nodes = [n for n in nodes if id(n) not in dead_ids]
    available = (
        {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}
        | {t.name for t in made.new_inits}
    )
    nodes = stable_toposort(nodes, available)
    # the helper work each layer's fusion repeats (sequence lengths, mask guards) computed once
    protected = graph_outputs | {x for n in nodes if has_subgraph(n) for x in subgraph_inputs(n)}
    aliases = equal_initializers(made.new_inits)
    nodes, merged = merge_shared_work(nodes, [*model.graph.initializer, *made.new_inits], keep_ids, protected,
                                      aliases)
    if merged or aliases:
        used_names = {i for n in nodes for i in n.input} | protected
    return nodes, used_names


def _rebuilt(model: onnx.ModelProto, nodes: list[onnx.NodeProto], used_names: set[str], made: _Made
             ) -> onnx.ModelProto:
    """A copy of the model with these nodes, the initializers still read and the value_info still true."""
    new_init_names = {t.name for t in made.new_inits}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    del g.node[:]
    g.node.extend(nodes)
    graph_inputs = {i.name for i in model.graph.input}
    keep_inits = [
        t
        for t in model.graph.initializer
        if (t.name in used_names or t.name in graph_inputs) and t.name not in new_init_names
    ]
    del g.initializer[:]
    g.initializer.extend(keep_inits)
    g.initializer.extend(t for t in made.new_inits if t.name in used_names)
    if out.ir_version < 4:  # before IR 4 every initializer is also a graph input
        listed = {i.name for i in g.input}
        for t in made.new_inits:
            if t.name in used_names and t.name not in listed:
                g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    # Intermediate value_info of tensors that no longer exist would confuse readers; keep the rest.
    produced = {o for n in nodes for o in n.output} | {t.name for t in g.initializer} | graph_inputs
    vis = [v for v in g.value_info if v.name in produced]
    del g.value_info[:]
    g.value_info.extend(vis)
    have = {o.domain for o in out.opset_import}
    for d, v in made.domains.items():
        if d not in have:
            out.opset_import.append(onnx.helper.make_opsetid(d, v))
    return out


def _standard_forms(out: onnx.ModelProto, fused_nodes: list[onnx.NodeProto], target_opset: int | None,
                    notes: list[str]) -> None:
    """Convert to target_opset (the fused ops written in the standard forms it has); FuseviewError when a
    fused standard op is not defined at the opset the model ends at."""
    before = next((o.version for o in out.opset_import if o.domain in ("", "ai.onnx")), 0)
    if target_opset is not None and target_opset != before:
        if target_opset < before:
            raise FuseviewError(f"--target-opset {target_opset}: the model is already at opset {before}")
        renamed = {
            n.name: n.op_type
            for n in fused_nodes
            if n.domain in ("", "ai.onnx") and n.op_type in ONNX_STANDARD_FORM and len(n.output) == 1
            and _defined_at(ONNX_STANDARD_FORM[n.op_type], target_opset)
        }
        for n in [*fused_nodes, *out.graph.node]:
            if n.name in renamed:
                n.op_type = ONNX_STANDARD_FORM[renamed[n.name]]
        _convert_to_opset(out, fused_nodes, target_opset, notes)
    after = next((o.version for o in out.opset_import if o.domain in ("", "ai.onnx")), 0)
    missing = sorted(
        {
            n.op_type
            for n in out.graph.node
            if n.name in {f.name for f in fused_nodes}
            and n.domain in ("", "ai.onnx")
            and n.op_type not in ORT_ONNX_DOMAIN_CONTRIB
            and not _defined_at(n.op_type, after)
        }
    )
    if missing:
        first = _first_opset(missing)
        raise FuseviewError(
            f"the fused {', '.join(missing)} needs ONNX opset {first} and the model keeps opset {after}:"
            f" reject those candidates, or convert the model with --target-opset {first}"
        )


# Ops whose schema changes between opsets 13 and 18 only added types or optional attributes whose defaults
# keep the old behaviour: a model using them means the same at the higher opset.
_COMPATIBLE_UPGRADES = frozenset(
    {
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Relu",
        "Identity",
        "Reshape",
        "Pow",
        "Shape",
        "Where",
        "LessOrEqual",
        "GreaterOrEqual",
        "LeakyRelu",
        "PRelu",
        "If",
        "Loop",
        "CumSum",
        "BatchNormalization",
        "GRU",
        "LSTM",
        "RNN",
        "ScatterElements",
        "ScatterND",
        "Less",
        "Greater",
        "Equal",
        "Trilu",
        "Scan",
    }
)


def _lacking_ops(rule, reps: list[Replacement], opset: int) -> list[str]:  # noqa: ANN001 - a Rule
    """The ONNX-domain ops a candidate would write that the opset lacks (onnxruntime's ONNX-domain contrib
    ops do not count: onnxruntime runs them at every opset)."""
    out = []
    for rep in reps:
        op = rule.fused_op if rep.op is None else rep.op
        domain = rule.domain if rep.domain is None else rep.domain
        standard = domain in ("", "ai.onnx") and op not in ORT_ONNX_DOMAIN_CONTRIB
        if op and standard and not _defined_at(op, opset):
            out.append(op)
    return sorted(set(out))


def _first_opset(ops: Iterable[str]) -> int:
    """The first ONNX opset that defines every op (this onnx's latest when none does)."""
    latest = onnx.defs.onnx_opset_version()
    ops = list(ops)
    return next((v for v in range(1, latest + 1) if all(_defined_at(op, v) for op in ops)), latest)


def _defined_at(op_type: str, version: int) -> bool:
    try:
        onnx.defs.get_schema(op_type, version)
        return True
    except Exception:  # noqa: BLE001 - SchemaError: not defined at that opset
        return False


def _convert_to_opset(
    model: onnx.ModelProto, new_nodes: list[onnx.NodeProto], need: int, notes: list[str]
) -> None:
    """Convert the model to ONNX opset ``need`` (--target-opset): a version bump where no op changes meaning,
    onnx's version converter where one does; FuseviewError when that fails. Notes say what changed."""
    imp = next((o for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if imp is None:
        raise FuseviewError("--target-opset: the model imports no ONNX opset to convert")
    latest = onnx.defs.onnx_opset_version()
    if need > latest:
        raise FuseviewError(f"--target-opset {need}: this onnx knows opsets up to {latest}")
    blockers = set()
    fused = {(n.name, n.op_type) for n in new_nodes}
    for n in model.graph.node:
        if (
            n.domain not in ("", "ai.onnx")
            or n.op_type in _COMPATIBLE_UPGRADES
            or (n.name, n.op_type) in fused
        ):
            continue
        try:
            old = onnx.defs.get_schema(n.op_type, imp.version).since_version
            new = onnx.defs.get_schema(n.op_type, need).since_version
        except Exception:  # noqa: BLE001
            blockers.add(n.op_type)
            continue
        if old != new:
            blockers.add(n.op_type)
    if blockers:
        old = imp.version
        if _convert_opset(model, new_nodes, old, need):
            notes.append(
                f"ONNX opset converted {old} -> {need} (--target-opset); onnx's version converter "
                f"rewrote {', '.join(sorted(blockers))} for the new opset"
            )
            return
        raise FuseviewError(
            f"--target-opset {need}: onnx's version converter cannot take the model from opset {old}"
            f" (ops whose meaning changes: {', '.join(sorted(blockers))})"
        )
    notes.append(f"ONNX opset converted {imp.version} -> {need} (--target-opset; no op changes meaning)")
    imp.version = need


_HIDDEN = "fuseview.opset_pending"


def _convert_opset(model: onnx.ModelProto, new_nodes: list[onnx.NodeProto], old: int, need: int) -> bool:
    """Raise the whole model to opset ``need`` with onnx's version converter (the fused ops, which the old
    opset lacks, are hidden from it meanwhile); True when the result passes the full checker."""
    fused = {n.name for n in new_nodes if n.domain in ("", "ai.onnx") and not _defined_at(n.op_type, old)}
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for n in probe.graph.node:
        if n.name in fused and n.domain in ("", "ai.onnx"):
            n.domain = _HIDDEN
    probe.opset_import.append(onnx.helper.make_opsetid(_HIDDEN, 1))
    try:
        converted = onnx.version_converter.convert_version(probe, need)
        for n in converted.graph.node:
            if n.domain == _HIDDEN:
                n.domain = ""
        imports = [o for o in converted.opset_import if o.domain != _HIDDEN]
        del converted.opset_import[:]
        converted.opset_import.extend(imports)
        check_model_where_weights_are(converted, full_check=True)
    except Exception:  # noqa: BLE001 - no adapter, or the result does not check: keep the old opset
        return False
    meta = list(model.metadata_props)
    model.CopyFrom(converted)
    if not model.metadata_props:
        model.metadata_props.extend(meta)
    return True


def apply_plan(
    model: onnx.ModelProto,
    accepted: Iterable[str],
    dims: dict[str, int] | None = None,
    base_dir: str | os.PathLike | None = None,
) -> ApplyResult:
    """Scan ``model`` and apply the accepted candidate ids: (model, plan) -> new model."""
    scan = scan_model(model, dims, base_dir=base_dir)
    return apply_candidates(model, scan, accepted)


def check_model_where_weights_are(
    model: onnx.ModelProto, base_dir: str | os.PathLike | None = None, full_check: bool = False
) -> None:
    """onnx.checker on the model; one with weights on disk is checked as a file whose weights point at an
    empty stand-in (the checker resolves external data against a model's folder, which an in-memory model
    lacks, and refuses hard links; the graph is what is checked, the weights' bytes were checked on read)."""
    if not has_disk_weights(model):
        onnx.checker.check_model(model, full_check=full_check)
        return
    with tempfile.TemporaryDirectory(prefix="fuseview-check-") as tmp:
        onnx.checker.check_model(str(stage_for_checker(model, tmp)), full_check=full_check)


def check_fused(model: onnx.ModelProto, base_dir: str | os.PathLike | None = None) -> list[str]:
    """Run onnx.checker; notes for expected onnxruntime-only ONNX-domain ops, raises on real errors."""
    notes: list[str] = []
    try:
        check_model_where_weights_are(model, base_dir)
        return notes
    except onnx.checker.ValidationError as exc:
        msg = str(exc)
        hit = re.search(r"No Op registered for (\w+) with domain_version of (\d+)", msg)
        if not hit or hit.group(1) not in ORT_ONNX_DOMAIN_CONTRIB:
            raise
    # Check again with those nodes swapped for a same-arity op the checker knows, to validate the rest.
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for n in probe.graph.node:
        if n.domain in ("", "ai.onnx") and n.op_type in ORT_ONNX_DOMAIN_CONTRIB:
            notes.append(f"{n.name}: {n.op_type} at this opset is an onnxruntime contrib op (not in ONNX)")
            n.op_type, n.domain = n.op_type, "com.microsoft.fuseview_probe"
    probe.opset_import.append(onnx.helper.make_opsetid("com.microsoft.fuseview_probe", 1))
    check_model_where_weights_are(probe, base_dir)
    return notes
