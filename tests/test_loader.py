"""Loading real models into graph documents, and every kind of bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.errors import FuseviewError
from fuseview.graph.loader import document_from_model, load_document
from tests.conftest import GPT2_MODELS, backend_models, gpt2_models

_BACKEND = backend_models()


def _tiny(nodes, inputs=("x",), outputs=("y",), inits=(), opsets=(("", 17),)) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        initializer=list(inits),
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


@pytest.mark.parametrize("path", gpt2_models(), ids=lambda p: p.name)
def test_shared_models_load_with_scopes_and_folded_constants(path: Path) -> None:
    doc = load_document(path)
    g = doc.graph
    proto = onnx.load(str(path), load_external_data=False)
    assert len(g.nodes) == len(proto.graph.node)
    assert g.inputs == ["input_ids", "attention_mask"]
    # every tensor a node reads is known, with the producer it really has
    for n in g.nodes:
        for t in n.inputs:
            if t:
                assert t in g.tensors
        for t in n.outputs:
            assert g.tensors[t].producer == n.index
    # folded constants have exactly one consumer, which lists them as folded inputs
    folded = [n for n in g.nodes if n.folded_into is not None]
    for n in folded:
        assert n.op_type == "Constant"
        assert n.outputs[0] in g.nodes[n.folded_into].folded_inputs
    constants = sum(1 for n in proto.graph.node if n.op_type == "Constant")
    assert len(folded) == constants  # these exports use each Constant once
    # initializers are drawn inside their consumers, never as edges
    assert all(g.tensors[e.tensor].kind != "initializer" for e in g.edges)
    # the transformer blocks carry scopes like ('transformer', 'h.1', ...) or ('m', 'transformer', 'h.1', ...)
    block_scopes = {s for n in g.nodes for s in n.scope if s.startswith("h.")}
    layers = int(path.name.split("_")[1].rstrip("l"))
    assert len(block_scopes) == layers
    # shape inference reached the logits
    out = g.tensors[g.outputs[0]]
    assert out.dtype == "float32" and out.shape is not None and len(out.shape) == 3


def test_gpt2_models_present() -> None:
    # the parametrised tests above would silently shrink to nothing if the folder moved
    assert len(gpt2_models()) >= 4


@pytest.mark.parametrize("path", _BACKEND, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_backend_model_loads(path: Path) -> None:
    doc = load_document(path)
    assert len(doc.graph.nodes) >= 1
    assert doc.graph.outputs
    for e in doc.graph.edges:
        assert doc.graph.nodes[e.src].visible and doc.graph.nodes[e.dst].visible


def test_backend_data_is_there() -> None:
    assert len(_BACKEND) > 100


def test_subgraph_bodies_and_outer_scope_reads() -> None:
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["t"], name="then_add")],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"], name="else_neg")],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])],
    )
    cond = numpy_helper.from_array(np.array(True), "cond")
    node = helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)
    doc = document_from_model(_tiny([node], inits=[cond]))
    n = doc.graph.node("branch")
    assert set(n.subgraphs) == {"then_branch", "else_branch"}
    assert n.subgraphs["then_branch"].node("then_add").inputs == ("x", "x")
    assert n.folded_inputs == ("cond",)


def test_local_functions_are_documents() -> None:
    fn = helper.make_function(
        "local",
        "Twice",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 17)],
    )
    m = _tiny(
        [helper.make_node("Twice", ["x"], ["y"], domain="local", name="call")],
        opsets=(("", 17), ("local", 1)),
    )
    m.functions.append(fn)
    doc = document_from_model(m)
    assert "local:Twice" in doc.functions
    assert doc.functions["local:Twice"].nodes[0].op_type == "Add"


def test_weights_are_not_read_for_external_data(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.ones((256, 256), np.float32), "w")
    m = _tiny([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], inits=[w])
    path = tmp_path / "ext.onnx"
    onnx.save(m, str(path), save_as_external_data=True, location="ext.bin", size_threshold=0)
    doc = load_document(path)
    init = next(t for t in doc.model.graph.initializer if t.name == "w")
    assert init.data_location == TensorProto.EXTERNAL and not init.raw_data
    assert doc.graph.tensors["w"].shape == (256, 256)


# ---- bad input: each gives one FuseviewError naming the problem -------------------------------------


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _bad_cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    good = (GPT2_MODELS / "gpt2_2l_ts17.onnx").read_bytes()
    cases = {
        "missing": (tmp_path / "nope.onnx", "no such file"),
        "folder": (tmp_path, "folder"),
        "empty": (_write(tmp_path, "empty.onnx", b""), "empty"),
        "text": (_write(tmp_path, "text.onnx", b"this is not a model\n"), "not an ONNX model"),
        "truncated": (_write(tmp_path, "trunc.onnx", good[: len(good) // 3]), "truncated or corrupt ONNX"),
    }
    m = _tiny([], outputs=("x",))
    p = tmp_path / "nonodes.onnx"
    onnx.save(m, str(p))
    cases["empty graph"] = (p, "no nodes")
    cyc = _tiny(
        [
            helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
            helper.make_node("Relu", ["a"], ["b"], name="n2"),
            helper.make_node("Identity", ["a"], ["y"], name="n3"),
        ]
    )
    p = tmp_path / "cycle.onnx"
    onnx.save(cyc, str(p))
    cases["cycle"] = (p, "cycle: 'n1' -> 'n2' -> 'n1'")  # the cycle named in order (networkx), not n3
    dangling = _tiny([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")])
    p = tmp_path / "dangling.onnx"
    onnx.save(dangling, str(p))
    cases["dangling"] = (p, "'ghost'")
    unknown = _tiny([helper.make_node("Frob", ["x"], ["y"], domain="com.example", name="frob")])
    p = tmp_path / "domain.onnx"
    onnx.save(unknown, str(p))
    cases["unknown domain"] = (p, "com.example")
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    ext = _tiny([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], inits=[w])
    p = tmp_path / "ext.onnx"
    onnx.save(ext, str(p), save_as_external_data=True, location="weights.bin", size_threshold=0)
    (tmp_path / "weights.bin").unlink()
    cases["missing external data"] = (p, "weights.bin")
    return cases


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "folder",
        "empty",
        "text",
        "truncated",
        "empty graph",
        "cycle",
        "dangling",
        "unknown domain",
        "missing external data",
    ],
)
def test_bad_input_is_one_clear_error(tmp_path: Path, case: str) -> None:
    path, expected = _bad_cases(tmp_path)[case]
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(FuseviewError) as info:
        load_document(path)
    msg = str(info.value)
    assert expected in msg and "\n" not in msg
    if before is not None:
        assert path.read_bytes() == before  # the source is never touched


@pytest.mark.parametrize(
    "case", ["missing", "text", "truncated", "cycle", "dangling", "missing external data"]
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path: Path, case: str, capsys) -> None:
    from fuseview.cli import main

    path, expected = _bad_cases(tmp_path)[case]
    assert main(["info", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fuseview: error:") and expected in err
    assert "Traceback" not in err


@pytest.mark.parametrize("cut", [7, 100, 1 / 3, 1 / 2])
def test_a_cut_model_is_called_truncated_and_names_the_field(tmp_path: Path, cut) -> None:
    good = (GPT2_MODELS / "gpt2_2l_ts17.onnx").read_bytes()
    n = int(len(good) * cut) if cut < 1 else int(cut)
    p = _write(tmp_path, "cut.onnx", good[:n])
    with pytest.raises(FuseviewError) as info:
        load_document(p)
    msg = str(info.value)
    assert f"truncated or corrupt ONNX file ({n:,} bytes, ended inside field " in msg
    field = msg.rsplit("field ", 1)[1].rstrip(")")
    assert field.split(".")[0] in {f.name for f in onnx.ModelProto.DESCRIPTOR.fields}


def test_random_bytes_are_not_called_truncated(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for i in range(200):
        data = rng.integers(0, 256, int(rng.integers(1, 4000)), np.uint8).tobytes()
        p = _write(tmp_path, f"r{i}.onnx", data)
        try:
            load_document(p)
        except FuseviewError as exc:
            assert "truncated" not in str(exc)
