"""Hostile inputs for every fuseview command: hand-built with onnx.helper, plus seeded byte-level mutants.

Each case is a command line run in its own folder; `check` says what must hold afterwards: the exit code
is an allowed one, a failure is one line `fuseview: error: ...` (never a traceback or an internal error),
nothing was written on failure, and no input changed. Used by tests/test_hostile.py and bench/fuzz.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
GiB = 1 << 30
FAIL = (2,)
ANY = (0, 2)


@dataclass
class Case:
    """One command line in its own folder, and the exit codes it may end with."""

    name: str
    argv: list[str]
    cwd: Path
    codes: tuple[int, ...] = FAIL
    outputs: tuple[str, ...] = ()  # files a successful run may create (relative to cwd)
    exec: bool = False  # run in a fresh interpreter (the Qt window)
    max_rss_mib: float | None = None  # a tighter memory bound than the suite's, where reading is the bug
    before: dict = field(default_factory=dict)

    def spec(self) -> dict:
        """The JSON the runner reads."""
        return {"name": self.name, "argv": self.argv, "cwd": str(self.cwd), "exec": self.exec}


def snapshot(folder: Path) -> dict[str, str]:
    """name -> content hash (or file kind) of everything in a folder, temp files included."""
    out = {}
    for p in sorted(folder.iterdir()):
        st = p.lstat()
        if p.is_symlink():
            out[p.name] = "link:" + os.readlink(p)
        elif p.is_dir():
            out[p.name] = "dir"
        elif not p.is_file():
            out[p.name] = "special"
        elif st.st_size > 64 << 20:
            out[p.name] = f"big:{st.st_size}:{st.st_mtime_ns}"
        else:
            out[p.name] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def check(case: Case, result: dict) -> list[str]:
    """What went wrong with one case's run (empty when the promise held)."""
    problems = []
    code, err = result["code"], result["stderr"]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if case.max_rss_mib is not None and result["peak_rss_mib"] > case.max_rss_mib:
        problems.append(f"peak RSS {result['peak_rss_mib']} MiB > {case.max_rss_mib} MiB")
    if result["timed_out"]:
        problems.append(f"timed out after {result['seconds']} s")
    if code not in case.codes:
        problems.append(f"exit {code}, expected one of {case.codes}")
    if "Traceback" in err or "internal error" in err:
        problems.append("traceback or internal error on stderr")
    if any(ch in result.get("stdout", "") for ch in "\x00\x1b\x07\u202e"):
        problems.append("raw control characters on stdout")
    if code == 0 and "--json" in case.argv and case.argv[0] in ("scan", "info"):
        try:
            json.loads(result.get("stdout", ""))
        except ValueError as exc:
            problems.append(f"--json output is not JSON ({exc})")
    if code == 2:
        errors = [ln for ln in lines if ln.startswith("fuseview: error: ")]
        if len(errors) != 1 or (len(lines) > 1 and case.exec is False):
            problems.append(f"not one error line: {lines[:3]!r}")
        if any(len(ln) > 600 for ln in lines):
            problems.append("error line longer than 600 characters")
        if any(ch in err for ch in "\x00\x1b\x07"):
            problems.append("raw control characters on stderr")
    after = snapshot(case.cwd)
    for name, digest in case.before.items():
        if after.get(name) != digest:
            problems.append(f"input {name} changed or vanished")
    new = set(after) - set(case.before)
    allowed = set(case.outputs) if code == 0 else set()
    if new - allowed:
        problems.append(f"left files behind: {sorted(new - allowed)}")
    for name in new & allowed:
        if name.endswith(".svg"):
            import xml.dom.minidom

            try:
                xml.dom.minidom.parse(str(case.cwd / name))
            except Exception as exc:  # noqa: BLE001
                problems.append(f"{name} is not well-formed XML ({exc})")
    return problems


# ------------------------------------------------------------------------------------------- models
def _model(
    nodes, inputs, outputs, inits=(), opsets=(("", 17),), ir: int = 8, functions=()
) -> onnx.ModelProto:
    g = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), initializer=list(inits))
    return helper.make_model(
        g,
        opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
        ir_version=ir,
        functions=list(functions),
    )


def _vi(name: str, dims, dtype=T.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, dims)


def mlp(seed: int = 0) -> onnx.ModelProto:
    """x[1,16] -> MatMul+Add+Relu -> MatMul+Add -> y[1,8]: candidates for fuse, fast to profile."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b1"),
        numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "w2"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
        helper.make_node("Add", ["h1", "b1"], ["a1"], name="add1"),
        helper.make_node("Relu", ["a1"], ["r1"], name="relu1"),
        helper.make_node("MatMul", ["r1", "w2"], ["h2"], name="mm2"),
        helper.make_node("Add", ["h2", "b2"], ["y"], name="add2"),
    ]
    return _model(nodes, [_vi("x", [1, 16])], [_vi("y", [1, 8])], inits)


def _relu(name: str = "relu", x: str = "x", y: str = "y", dims=(2,)) -> onnx.ModelProto:
    return _model([helper.make_node("Relu", [x], [y], name=name)], [_vi(x, list(dims))], [_vi(y, list(dims))])


def hostile_models() -> dict[str, tuple[bytes, tuple[int, ...]]]:
    """name -> (file bytes, exit codes allowed for commands that read the model)."""
    m: dict[str, tuple[bytes, tuple[int, ...]]] = {}

    def add(name, model, codes=FAIL):
        m[name] = (model.SerializeToString() if isinstance(model, onnx.ModelProto) else model, codes)

    x, y = _vi("x", [2]), _vi("y", [2])
    add(
        "cycle",
        _model(
            [
                helper.make_node("Add", ["x", "b"], ["a"]),
                helper.make_node("Relu", ["a"], ["b"]),
                helper.make_node("Identity", ["a"], ["y"]),
            ],
            [x],
            [y],
        ),
    )
    add("dangling", _model([helper.make_node("Add", ["x", "ghost"], ["y"])], [x], [y]))
    add(
        "two_writers",
        _model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])], [x], [y]),
    )
    add("undeclared_domain", _model([helper.make_node("Frob", ["x"], ["y"], domain="com.example")], [x], [y]))
    add("no_nodes", _model([], [x], [x]))
    add("output_unproduced", _model([helper.make_node("Relu", ["x"], ["z"])], [x], [y]))
    add(
        "unsorted",
        _model([helper.make_node("Relu", ["a"], ["y"]), helper.make_node("Neg", ["x"], ["a"])], [x], [y]),
        ANY,
    )
    dup = _relu()
    dup.opset_import.extend([helper.make_opsetid("", 13)])
    add("duplicate_opset", dup, ANY)
    bad_attr = _model([helper.make_node("Softmax", ["x"], ["y"], axis=0)], [x], [y])
    bad_attr.graph.node[0].attribute[0].type = onnx.AttributeProto.UNDEFINED
    add("attribute_without_type", bad_attr, ANY)
    gather = _model(
        [helper.make_node("Gather", ["x", "i"], ["y"])],
        [_vi("x", [2])],
        [_vi("y", [1])],
        [numpy_helper.from_array(np.array([7], np.int64), "i")],
    )
    add("gather_out_of_range", gather, ANY)
    add("wrong_arity", _model([helper.make_node("Add", ["x"], ["y"])], [x], [y]), ANY)
    add("unknown_op", _model([helper.make_node("NoSuchOp", ["x"], ["y"])], [x], [y]), ANY)
    add("opset_9999", _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y], opsets=(("", 9999),)), ANY)
    named = mlp()
    for k, n in enumerate(named.graph.node):
        n.name = f"node{k}\x1b[31m\x07\x00\u202e\x85\n"
    add("control_names_mlp", named, ANY)
    add(
        "control_names",
        _relu(name="a\x1b[31mred\x07\x00nul\nline\u202eevil", x="in\x1b]0;t\x07", y="o\r"),
        ANY,
    )
    bad_utf8 = bytearray(_relu(name="NODENAMEX").SerializeToString())
    i = bad_utf8.index(b"NODENAMEX")
    bad_utf8[i : i + 2] = b"\xff\xfe"
    add("invalid_utf8_name", bytes(bad_utf8), ANY)
    big = [_vi("a", [1 << 24], T.INT64), _vi("b", [1 << 24], T.INT64)]
    add(
        "declared_int_vectors_2p24",
        _model([helper.make_node("Add", ["a", "b"], ["y"])], big, [_vi("y", [1 << 24], T.INT64)]),
        ANY,
    )
    add("declared_dims_2p30", _relu(dims=(1 << 30,)), ANY)
    add("declared_dims_2p40", _relu(dims=(1 << 20, 1 << 20)), ANY)
    w = numpy_helper.from_array(np.arange(64, dtype=np.float32), "w")
    shape = numpy_helper.from_array(np.array([1 << 25, 64], np.int64), "s")
    add(
        "fold_bomb",
        _model(
            [helper.make_node("Expand", ["w", "s"], ["e"]), helper.make_node("Add", ["x", "e"], ["y"])],
            [_vi("x", [1, 64])],
            [_vi("y", [1 << 25, 64])],
            [w, shape],
        ),
        ANY,
    )
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "b", [], [_vi("t", [2])])
    add(
        "if_missing_condition",
        _model([helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)], [x], [y]),
    )
    add(
        "if_branch_dangling",
        _model(
            [
                helper.make_node(
                    "If",
                    ["x"],
                    ["y"],
                    then_branch=helper.make_graph(
                        [helper.make_node("Identity", ["ghost"], ["t"])], "b", [], [_vi("t", [2])]
                    ),
                    else_branch=branch,
                )
            ],
            [x],
            [y],
        ),
    )
    add("empty_file", b"")
    add("text_file", b"this is not a model\n")
    add("truncated", mlp().SerializeToString()[:150])
    add("zeros", b"\x00" * 4096)
    add("negative_dims", _relu(dims=(-5,)), ANY)
    return m


from tests.hostile_mutants import BYTE_MUTATIONS, mutants, mutate_bytes, proto_mutants  # noqa: E402, F401
from tests.hostile_runner import cleanup, run_cases  # noqa: E402, F401 - the cases' runner, used with them

# -------------------------------------------------------------------------------------------- cases
PROFILE = ["--runs", "2", "--warmup", "0", "--quiet"]
TUNE = ["--budget", "5", "--runs", "4", "--sessions", "2", "--seeds", "1", "--ort-optimizer", "off",
        "--quiet"]


def model_commands(
    name: str, codes: tuple[int, ...], window: bool = False
) -> list[tuple[str, list[str], tuple, tuple]]:
    """(label, argv, codes, outputs) of every command run on model file m.onnx."""
    cmds = [
        ("info", ["info", "m.onnx"], codes, ()),
        ("render", ["render", "m.onnx", "-o", "out.svg"], codes, ("out.svg",)),
        ("scan", ["scan", "m.onnx", "--near-misses"], codes, ()),
        ("scan --json", ["scan", "m.onnx", "--json"], codes, ()),
        (
            "fuse",
            ["fuse", "m.onnx", "-o", "out.onnx", "--save-plan", "plan.json"],
            codes,
            ("out.onnx", "plan.json"),
        ),
        ("profile", ["profile", "m.onnx", *PROFILE, "--json", "rep.json"], codes + (3,), ("rep.json",)),
        ("tune", ["tune", "m.onnx", "-o", "tuned.onnx", *TUNE, "--json", "tune.json", "--save-plan",
                  "tp.json"], codes, ("tuned.onnx", "tune.json", "tp.json")),
    ]
    if window:
        cmds.append(("open", ["open", "m.onnx", "--apply", "--screenshot", "shot.png"], codes, ("shot.png",)))
    return cmds


def _write(folder: Path, files: dict[str, bytes | str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if data == "fifo":
            os.mkfifo(p)
        elif isinstance(data, str) and data.startswith("sparse:"):
            with open(p, "wb") as f:
                f.truncate(int(data.split(":")[1]))
        elif isinstance(data, str):
            p.write_text(data)
        else:
            p.write_bytes(data)


def _zip_bomb_npz(path: Path) -> None:
    """A tiny .npz whose directory declares a 3 GiB array (the central directory is patched)."""
    np.savez_compressed(path, x=np.zeros((1, 16), np.float32))
    data = bytearray(path.read_bytes())
    cd = data.rfind(b"PK\x01\x02")
    struct.pack_into("<I", data, cd + 24, 3 * GiB)  # uncompressed size in the central directory
    path.write_bytes(bytes(data))


def build_cases(root: Path, seed: int = 0, mutant_count: int = 8, window: bool = True) -> list[Case]:
    """Every case, each in its own folder under root."""
    cases: list[Case] = []
    n = 0

    def case(name, argv, files, codes=FAIL, outputs=(), exec_=False):
        nonlocal n
        n += 1
        folder = root / f"{n:03d}"
        _write(folder, files)
        c = Case(name, argv, folder, codes, tuple(outputs), exec_)
        c.before = snapshot(folder)
        cases.append(c)

    good = mlp(seed).SerializeToString()
    for name, (data, codes) in hostile_models().items():
        for label, argv, cc, outs in model_commands(name, codes):
            if label == "scan --json" and codes == FAIL:
                continue  # the text scan already shows the refusal
            case(f"{name}/{label}", argv, {"m.onnx": data}, cc, outs)
            if name.startswith("declared_") and label in ("info", "render", "scan", "scan --json"):
                cases[-1].max_rss_mib = 700  # looking at a model never materialises its declared inputs
    for name, data in proto_mutants(seed, mutant_count):
        for label, argv, _cc, outs in model_commands(name, ANY):
            if label in ("scan", "fuse", "profile"):
                case(f"{name}/{label}", argv, {"m.onnx": data}, ANY + (3,), outs)
    for name, data in mutants(seed, mutant_count):
        for label, argv, _cc, outs in model_commands(name, ANY):
            if label in ("info", "scan --json", "fuse"):
                case(f"{name}/{label}", argv, {"m.onnx": data}, ANY, outs)

    plan = json.dumps({"format": "fuseview-plan", "decisions": []})
    m = {"m.onnx": good}
    # outputs that are inputs, devices, FIFOs or folders
    case("fuse -o source", ["fuse", "m.onnx", "-o", "m.onnx"], m)
    case("fuse --save-plan source", ["fuse", "m.onnx", "-o", "f.onnx", "--save-plan", "m.onnx"], m)
    case(
        "fuse --save-plan the --plan",
        ["fuse", "m.onnx", "-o", "f.onnx", "--plan", "p.json", "--save-plan", "p.json"],
        {**m, "p.json": plan},
    )
    case("fuse -o /dev/null", ["fuse", "m.onnx", "-o", "/dev/null"], m)
    case("fuse -o folder", ["fuse", "m.onnx", "-o", "sub"], {**m, "sub/keep": "x"})
    case("fuse -o fifo", ["fuse", "m.onnx", "-o", "out.fifo"], {**m, "out.fifo": "fifo"})
    case("fuse -o missing folder", ["fuse", "m.onnx", "-o", "nope/f.onnx"], m)
    case("fuse -o hardlink of source", ["fuse", "m.onnx", "-o", "link.onnx"], m)
    os.link(cases[-1].cwd / "m.onnx", cases[-1].cwd / "link.onnx")
    cases[-1].before = snapshot(cases[-1].cwd)
    case("fuse -o symlink to source", ["fuse", "m.onnx", "-o", "sym.onnx"], m)
    os.symlink("m.onnx", cases[-1].cwd / "sym.onnx")
    cases[-1].before = snapshot(cases[-1].cwd)
    case("render -o /dev/null.svg-like device", ["render", "m.onnx", "-o", "/dev/zero"], m)
    case("render -o source", ["render", "m.onnx", "-o", "m.onnx"], m)
    case("profile --json source", ["profile", "m.onnx", *PROFILE, "--json", "m.onnx"], m)
    case(
        "profile --json against",
        ["profile", "m.onnx", "--against", "x.onnx", *PROFILE, "--json", "x.onnx"],
        {**m, "x.onnx": good},
    )
    case("profile --json /dev/full", ["profile", "m.onnx", *PROFILE, "--json", "/dev/full"], m)
    case("tune -o source", ["tune", "m.onnx", "-o", "m.onnx", *TUNE], m)
    case("tune --json source", ["tune", "m.onnx", "-o", "t.onnx", *TUNE, "--json", "m.onnx"], m)
    case("tune --save-plan folder", ["tune", "m.onnx", "-o", "t.onnx", *TUNE, "--save-plan", "sub"],
         {**m, "sub/keep": "x"})
    case("tune -o /dev/null", ["tune", "m.onnx", "-o", "/dev/null", *TUNE], m)
    case(
        "fuse -o name with newline",
        ["fuse", "m.onnx", "-o", "a\nb\x1b[2J.onnx"],
        m,
        (0,),
        ("a\nb\x1b[2J.onnx",),
    )
    # inputs that are FIFOs, devices, huge, deep, malformed
    case("model is a fifo", ["scan", "m.onnx"], {"m.onnx": "fifo"})
    case("model is /dev/zero", ["info", "/dev/zero"], {})
    case("model is a folder", ["info", "d"], {"d/x": "x"})
    case("model is a sparse 2.5 GiB file", ["scan", "m.onnx"], {"m.onnx": f"sparse:{5 * GiB // 2}"})
    case("fuse --plan fifo", ["fuse", "m.onnx", "-o", "f.onnx", "--plan", "p.json"], {**m, "p.json": "fifo"})
    case("fuse --plan /dev/zero", ["fuse", "m.onnx", "-o", "f.onnx", "--plan", "/dev/zero"], m)
    case("fuse --plan /dev/urandom", ["fuse", "m.onnx", "-o", "f.onnx", "--plan", "/dev/urandom"], m)
    case(
        "fuse --plan deep",
        ["fuse", "m.onnx", "-o", "f.onnx", "--plan", "p.json"],
        {**m, "p.json": "[" * 100_000 + "]" * 100_000},
    )
    case(
        "fuse --plan 1 MB id",
        ["fuse", "m.onnx", "-o", "f.onnx", "--plan", "p.json"],
        {
            **m,
            "p.json": json.dumps(
                {"format": "fuseview-plan", "decisions": [{"id": "x" * 1_000_000, "decision": "accept"}]}
            ),
        },
    )
    case(
        "fuse --plan decisions a number",
        ["fuse", "m.onnx", "-o", "f.onnx", "--plan", "p.json"],
        {**m, "p.json": json.dumps({"format": "fuseview-plan", "decisions": 5})},
    )
    case(
        "fuse --plan id a list",
        ["fuse", "m.onnx", "-o", "f.onnx", "--plan", "p.json"],
        {
            **m,
            "p.json": json.dumps(
                {"format": "fuseview-plan", "decisions": [{"id": [1], "decision": "accept"}]}
            ),
        },
    )
    case(
        "fuse --plan NaN",
        ["fuse", "m.onnx", "-o", "f.onnx", "--plan", "p.json"],
        {**m, "p.json": '{"format": "fuseview-plan", "decisions": [], "x": NaN}'},
    )
    case(
        "fuse --plan invalid utf-8",
        ["fuse", "m.onnx", "-o", "f.onnx", "--plan", "p.json"],
        {**m, "p.json": b'{"format": "\xff\xfe"}'},
    )
    case("profile --inputs zip bomb", ["profile", "m.onnx", *PROFILE, "--inputs", "in.npz"], m)
    _zip_bomb_npz(cases[-1].cwd / "in.npz")
    cases[-1].before = snapshot(cases[-1].cwd)
    case(
        "profile --inputs fifo",
        ["profile", "m.onnx", *PROFILE, "--inputs", "in.npz"],
        {**m, "in.npz": "fifo"},
    )
    case(
        "profile --inputs not a zip",
        ["profile", "m.onnx", *PROFILE, "--inputs", "in.npz"],
        {**m, "in.npz": b"PK\x03\x04garbage"},
    )
    case("profile --threads 100000", ["profile", "m.onnx", *PROFILE, "--threads", "100000"], m)
    case("profile --threads -1", ["profile", "m.onnx", *PROFILE, "--threads", "-1"], m)
    case("profile --runs 0", ["profile", "m.onnx", "--runs", "0", "--quiet"], m)
    case("scan --dim garbage", ["scan", "m.onnx", "--dim", "\x1b[2J=3"], m, ANY)
    case("unknown option", ["scan", "m.onnx", "--frobnicate\x1b[2J"], m)
    case("long bad argument", ["scan", "m.onnx", "--dim", "x" * 100_000], m)
    case("ext data missing", ["scan", "m.onnx"], {"m.onnx": _external_model("gone.bin")})
    case(
        "ext data escapes folder",
        ["info", "m.onnx"],
        {"m.onnx": _external_model("../../../etc/passwd")},
        FAIL,
    )
    for argv in (["scan", "m.onnx"], ["info", "m.onnx"], ["render", "m.onnx", "-o", "g.svg"]):
        # a 1 GiB weight in a 2.5 GiB sparse file: looking at the model must not read it
        case(
            f"ext data is huge (sparse)/{argv[0]}",
            argv,
            {"m.onnx": _external_model("w.bin", n=1 << 14), "w.bin": f"sparse:{5 * GiB // 2}"},
            (0,),
            ("g.svg",),
        )
        cases[-1].max_rss_mib = 700
    case(
        "fuse -o the model's external data",
        ["fuse", "m.onnx", "-o", "w.bin", "--no-validate"],
        {"m.onnx": _external_model("w.bin"), "w.bin": b"\x00" * 64},
    )
    case("render -o symlink to a device", ["render", "m.onnx", "-o", "out.svg"], m)
    os.symlink("/dev/null", cases[-1].cwd / "out.svg")
    cases[-1].before = snapshot(cases[-1].cwd)
    case(
        "profile --against itself --json it",
        ["profile", "m.onnx", "--against", "m.onnx", *PROFILE, "--json", "m.onnx"],
        m,
    )
    case("model name with newline and ESC", ["info", "a\nb\x1b[2J.onnx"], {"a\nb\x1b[2J.onnx": b"junk"})
    if window:
        case(
            "open --screenshot onto folder",
            ["open", "m.onnx", "--apply", "--screenshot", "d.png"],
            {**m, "d.png/x": "x"},
            exec_=True,
        )
        case(
            "open --plan decisions a number",
            ["open", "m.onnx", "--plan", "p.json", "--screenshot", "s.png"],
            {**m, "p.json": json.dumps({"format": "fuseview-plan", "decisions": 5})},
            exec_=True,
        )
        case(
            "open --plan fifo",
            ["open", "m.onnx", "--plan", "p.json", "--screenshot", "s.png"],
            {**m, "p.json": "fifo"},
            exec_=True,
        )
        case("open --screenshot source", ["open", "m.onnx", "--screenshot", "m.onnx"], m, exec_=True)
    return cases


def _external_model(location: str, n: int = 4) -> bytes:
    w = onnx.TensorProto()
    w.name, w.data_type = "w", T.FLOAT
    w.dims.extend([n, n])
    w.data_location = T.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(n * n * 4))):
        e = w.external_data.add()
        e.key, e.value = k, v
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"])]
    return _model(nodes, [_vi("x", [1, n])], [_vi("y", [1, n])], [w]).SerializeToString()
