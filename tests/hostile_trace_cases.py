"""Hostile profiler traces for `fuseview trace`: hand-built attacks, small files of huge cost, seeded mutants.

Each case is a `fuseview trace` command line in its own folder, run as `python -m fuseview` in a fresh
process (Case.exec) under a time and an address-space limit; tests/hostile_cases.check says what must
hold, `strict_problems` adds: a refusal is exactly one stderr line. Used by tests/test_hostile_traces.py
and bench/fuzz.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path

from tests.hostile_cases import ANY, BYTE_MUTATIONS, FAIL, ROOT, Case, mlp, mutate_bytes, snapshot

TRACES = ROOT / "tests" / "data" / "traces"
MiB = 1 << 20
GiB = 1 << 30
LINEAR_S = 5  # CPU seconds a provenance log of one hostile line may cost (issue 27: 27 s before)
COSTLY_S = 8  # CPU seconds for small files of huge cost: linear work takes a few (quadratic: 15+)


def _x(name="aten::mm", ts=1, dur=2, cat="cpu_op", pid=1, tid=1, **extra) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, **extra}


def _kineto(events: list) -> str:
    return json.dumps({"schemaVersion": 1, "traceEvents": events})


def _steps(n: int, dur: float = 100.0) -> list[dict]:
    out = []
    for i in range(n):
        t = i * (dur + 10)
        out.append(_x(f"ProfilerStep#{i}", t, dur, "user_annotation"))
        out.append(_x("aten::mm", t + 1, dur / 2))
    return out


def ort_events(nodes: int = 3, runs: int = 2) -> list[dict]:
    """An onnxruntime-shaped profile: Session model_run events and the Node events inside them."""
    ev: list[dict] = [{"cat": "Session", "pid": 1, "tid": 1, "dur": 5, "ts": 0, "ph": "X",
                       "name": "model_loading_uri", "args": {}}]
    t = 10
    for _ in range(runs):
        ev.append({"cat": "Session", "pid": 1, "tid": 1, "dur": nodes * 10 + 5, "ts": t, "ph": "X",
                   "name": "model_run", "args": {}})
        for k in range(nodes):
            ev.append({"cat": "Node", "pid": 1, "tid": 1, "dur": 8, "ts": t + 1 + k * 10, "ph": "X",
                       "name": f"n{k}_kernel_time",
                       "args": {"op_name": "Relu", "provider": "CPUExecutionProvider"}})
        t += nodes * 10 + 20
    return ev


def nested(depth: int) -> str:
    """depth/2 ops each inside the one before, then depth/2 other ops side by side in the innermost one."""
    half = depth // 2
    chain = [_x("aten::mul", i, 4 * depth - 2 * i) for i in range(half)]
    leaves = [_x("aten::add", half + 2 * k, 1) for k in range(half)]
    return _kineto(chain + leaves)


def segmentation_bomb(kernels: int = 2000, pieces: int = 400) -> tuple[str, str]:
    """(before, after): many op names in before, after's kernel names made of hundreds of them."""
    ops = [f"op{i}_x" for i in range(pieces)]
    before = _kineto([_x(f"aten::{o}", i, 1) for i, o in enumerate(ops)] + [_x("aten::a_b_c_d_e_f_g", 0, 1)])
    after = _kineto([_x(f"cpp_fused_{'_'.join(random.Random(k).sample(ops, pieces // 2))}_{k}", k, 1,
                        "cpu_op") for k in range(kernels)])
    return before, after


def hostile_traces() -> dict[str, tuple[object, tuple[int, ...]]]:
    """name -> (trace file content, allowed exit codes) for `fuseview trace t.json`."""
    t: dict[str, tuple[object, tuple[int, ...]]] = {}
    for key, value in (("name", ["a"]), ("name", {"a": 1}), ("cat", ["kernel"]), ("cat", {"x": 1}),
                       ("pid", [1]), ("pid", {"a": 1}), ("tid", [2]), ("tid", {"b": 2}), ("name", 5)):
        t[f"{key} is a {type(value).__name__} ({json.dumps(value)})"] = (_kineto([_x(**{key: value})]), FAIL)
    for c in (1 << 63, 1 << 64, -(1 << 70), 10**400):
        t[f"correlation {str(c)[:12]}"] = (_kineto([_x(args={"correlation": c})]), ANY)
    for key in ("ts", "dur"):
        for digits in (400, 5000):
            t[f"{key} of {digits} digits"] = (_kineto([_x(**{key: 7777})]).replace("7777", "9" * digits),
                                              FAIL)
        t[f"{key} NaN"] = (_kineto([_x(**{key: 1})]).replace(f'"{key}": 1', f'"{key}": NaN'), FAIL)
        t[f"{key} Infinity"] = (_kineto([_x(**{key: 1})]).replace(f'"{key}": 1', f'"{key}": -Infinity'), FAIL)
        t[f"{key} 'inf'"] = (_kineto([_x(**{key: "inf"})]), FAIL)
        t[f"{key} a list"] = (_kineto([_x(**{key: [1]})]), FAIL)
        t[f"{key} 1e300"] = (_kineto([_x(**{key: 1e300})]), FAIL)
    t["negative dur"] = (_kineto([_x(dur=-5)]), FAIL)
    t["zero-length steps"] = (_kineto(_steps(5, 0.0)), ANY)
    t["an event is null"] = (_kineto([_x(), None]), FAIL)
    t["an event is a number"] = (_kineto([_x(), 7]), FAIL)
    t["backslash-q in a name"] = (_kineto([_x(name="QQQ")]).replace("QQQ", "aten\\q"), FAIL)
    t["events nested 100000 deep in args"] = (_kineto([_x()]).replace('"pid"', '"args": ' + "[" * 100_000
                                                                        + "]" * 100_000 + ', "pid"'), FAIL)
    ort = ort_events()
    t["onnxruntime: a null event"] = (json.dumps([*ort, None]), FAIL)
    t["onnxruntime: args a list"] = (json.dumps(ort[:2] + [{**ort[2], "args": [1, 2]}] + ort[3:]), FAIL)
    t["onnxruntime: ts a string"] = (json.dumps(ort[:2] + [{**ort[2], "ts": "soon"}] + ort[3:]), FAIL)
    t["onnxruntime: name a list"] = (json.dumps(ort[:2] + [{**ort[2], "name": ["x"]}] + ort[3:]), FAIL)
    t["onnxruntime: dur NaN"] = (json.dumps(ort).replace('"dur": 8', '"dur": NaN', 1), FAIL)
    t["onnxruntime: backslash-q"] = (json.dumps(ort).replace("n0_kernel", "n0\\q"), FAIL)
    t["onnxruntime: ok, one line"] = (json.dumps(ort), (0,))
    t["[ and 1 GiB of NUL bytes"] = (("sparse", b"[", GiB), FAIL)
    t["{traceEvents: [ and 1 GiB of NUL bytes"] = (("sparse", b'{"traceEvents": [', GiB), FAIL)
    t["[ and 40 MB of spaces"] = (b"[" + b" " * (40 * MiB), FAIL)
    t["an event of 20 MB"] = (_kineto([_x(args={"x": "y" * (20 * MiB)})]), ANY)
    t["250,000 distinct names"] = (_kineto([_x(f"n{i}", i, 1) for i in range(250_000)]), FAIL)
    return t


def mutants(seed: int, count: int) -> list[tuple[str, bytes]]:
    """Seeded mutations of a real torch.profiler trace: byte flips, truncation, splices, bad values."""
    rng = random.Random(seed * 104729 + 7)
    base = (TRACES / "cos_relu_compiled.json").read_bytes()
    values = [b"NaN", b"-1", b"1e999", b"null", b"[]", b"{}", b'"x"', b"true", b"9" * 500, b'"\\q"']
    out = []
    for k in range(count):
        data = bytearray(base)
        how = rng.choice(["flip", "truncate", "splice", "value", "delete"])
        if how in BYTE_MUTATIONS:
            data = mutate_bytes(rng, data, how)
        elif how == "delete":
            a = rng.randrange(len(data))
            del data[a:a + rng.randint(1, 64)]
        else:  # a field's value replaced by one of the wrong kind
            colons = [i for i, ch in enumerate(data) if ch == ord(":")]
            i = rng.choice(colons) + 1
            j = i
            while j < len(data) and data[j] not in b",}]":
                j += 1
            data[i:j] = b" " + rng.choice(values)
        out.append((f"trace_mutant_{seed}_{k}_{how}", bytes(data)))
    return out


CAPTURE = TRACES / "provenance" / "mlp_block"
CAPTURE_LOG = next((CAPTURE / "torch_trace").glob("*.log"))


def log_record(header: dict, payload: str | bytes | None = None, pid: int = 14941,
               clock: str = "1203 05:39:51.000000") -> bytes:
    """One TORCH_TRACE record as torch writes it: a header line, then its payload's lines with their md5."""
    data = payload.encode() if isinstance(payload, str) else payload
    if data is not None:
        header = header | {"has_payload": hashlib.md5(data, usedforsecurity=False).hexdigest()}
    head = f"V{clock} {pid} torch/_inductor/compile_fx.py:1] {json.dumps(header)}\n".encode()
    return head + b"".join(b"\t" + ln + b"\n" for ln in data.split(b"\n")) if data is not None else head


def _post_grad(body: str, frame: int = 9) -> bytes:
    code = f"class GraphModule(torch.nn.Module):\n    def forward(self, arg0_1: \"f32[2]\"):\n{body}\n"
    return log_record({"artifact": {"name": "inductor_post_grad_graph", "encoding": "string"},
                       "frame_id": frame, "frame_compile_id": 0, "attempt": 0}, code)


def hostile_logs() -> dict[str, tuple[bytes, int | None, int | None]]:
    """name -> (records appended to a real capture's log, CPU-second bound, RSS bound in MiB)."""
    big_line = "        mul: \"f32[2]\" = arg0_1" + " " * 80_000 + "x"
    file_line = "        # File: /x.py" + ":1 in x" * 30_000
    nodes = "\n".join(f"        mul_{i}: \"f32[2]\" = torch.ops.aten.mul.Tensor(arg0_1, {i})"
                      for i in range(600_000))  # a ~40 MiB payload of 600,000 nodes
    h = {"artifact": {"name": "inductor_provenance_tracking_node_mappings", "encoding": "json"},
         "frame_id": 9, "frame_compile_id": 0}
    return {
        "an 80,000-character line in a post-grad graph": (_post_grad(big_line), LINEAR_S, None),
        "a # File: line of 30,000 ':1 in x' pieces": (_post_grad(f"{file_line}\n{big_line}"),
                                                      LINEAR_S, None),
        "a 40 MiB post-grad payload": (_post_grad(nodes), None, 250),
        "a record header without attempt": (log_record(h, json.dumps({"postToPre": {}})), None, None),
        "frame ids that are true and a string": (log_record(h | {"frame_id": True, "frame_compile_id": "0"},
                                                            "{}"), None, None),
        "an artifact name that is a list": (log_record(h | {"artifact": {"name": ["x"]}}, "{}"), None, None),
        "has_payload true, no payload lines": (log_record(h | {"has_payload": True}), None, None),
        "a provenance payload that is a list": (log_record(h | {"attempt": 0}, "[1, 2]"), None, None),
        "a record header that is a list": (b"V1203 05:39:51.000000 14941 x.py:1] {\"a\": [1]}\n"
                                           b"V1203 05:39:51.000000 14941 x.py:1] [1]\n", None, None),
        "output code of 200,000 quoted graph_ names": (log_record(
            {"inductor_output_code": {"filename": "x.py"}, "frame_id": 0, "frame_compile_id": 0,
             "attempt": 0},
            '"graph_0_cpp_' * 200_000), LINEAR_S, None),
        "a stack of 100,000 'File \"' pieces": (log_record(
            {"artifact": {"name": "inductor_provenance_tracking_kernel_stack_traces", "encoding": "json"},
             "frame_id": 9, "frame_compile_id": 0, "attempt": 0},
            json.dumps({"k": ['File "' * 100_000 + '", line 1, in f\nx']})), LINEAR_S, None),
    }


def provenance_mutants(seed: int, count: int) -> list[tuple[str, bytes]]:
    """Seeded mutations of a real provenance log: bytes, then (half the time) payload md5s made right again,
    so the reader gets past its md5 check into the records' contents."""
    rng = random.Random(seed * 7919 + 3)
    base = CAPTURE_LOG.read_bytes()
    out = []
    for k in range(count):
        how = rng.choice(BYTE_MUTATIONS)
        data = mutate_bytes(rng, bytearray(base), how)
        if rng.random() < 0.5:
            data = bytearray(_fix_md5s(bytes(data)))
            how += "+md5"
        out.append((f"provenance_mutant_{seed}_{k}_{how}", bytes(data)))
    return out


def _fix_md5s(data: bytes) -> bytes:
    """Each header's has_payload set to its payload's md5 (headers that are not JSON left as they are)."""
    out, lines = [], data.split(b"\n")
    i = 0
    while i < len(lines):
        head, j = lines[i], i + 1
        while j < len(lines) and lines[j].startswith(b"\t"):
            j += 1
        close = head.find(b"] {")
        try:
            rec = json.loads(head[close + 2:]) if close > 0 else None
        except ValueError:
            rec = None
        if isinstance(rec, dict) and "has_payload" in rec and j > i + 1:
            body = b"\n".join(ln[1:] for ln in lines[i + 1:j])
            rec["has_payload"] = hashlib.md5(body, usedforsecurity=False).hexdigest()
            head = head[:close + 2] + json.dumps(rec).encode()
        out.append(head)
        out.extend(lines[i + 1:j])
        i = j
    return b"\n".join(out)


def _capture_files(log: bytes) -> dict[str, object]:
    return {"eager.json": (CAPTURE / "eager.json").read_bytes(),
            "compiled.json": (CAPTURE / "compiled.json").read_bytes(), "torch_trace/t.log": log}


def _write(folder: Path, files: dict[str, object]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if data == "fifo":
            os.mkfifo(p)
        elif isinstance(data, tuple):  # ("sparse", head, size): head, then NUL bytes that take no disk
            p.write_bytes(data[1])
            os.truncate(p, data[2])
        elif isinstance(data, str):
            p.write_text(data, encoding="utf-8")
        else:
            p.write_bytes(data)  # type: ignore[arg-type]


def build_cases(root: Path, seed: int = 0, mutant_count: int = 10, hand_made: bool = True,
                fresh: bool = True) -> list[Case]:
    """The trace cases, each in its own folder under root (hand-made ones unless hand_made is False).

    fresh: each runs `python -m fuseview` in a new interpreter; else in a forked warm one (for fuzzing).
    """
    cases: list[Case] = []

    def case(name, argv, files, codes=FAIL, outputs=(), max_rss_mib=None, max_seconds=None):
        folder = root / f"t{len(cases):03d}"
        _write(folder, files)
        c = Case(name, argv, folder, codes, tuple(outputs), exec=fresh, max_rss_mib=max_rss_mib)
        c.max_seconds = max_seconds  # type: ignore[attr-defined] - where the cost itself is the attack
        c.before = snapshot(folder)
        cases.append(c)

    prov = ["trace", "eager.json", "compiled.json", "--provenance", "torch_trace"]
    for name, data in provenance_mutants(seed, mutant_count):
        case(name, prov, _capture_files(data), ANY)
    for name, data in mutants(seed, mutant_count):
        case(f"{name}/trace", ["trace", "t.json"], {"t.json": data}, ANY)
        case(f"{name}/compare", ["trace", "b.json", "t.json", "--json", "r.json"],
             {"t.json": data, "b.json": (TRACES / "cos_relu_eager.json").read_bytes()}, ANY, ("r.json",))
    if not hand_made:
        return cases
    real = CAPTURE_LOG.read_bytes()
    for name, (extra, cpu_s, rss) in hostile_logs().items():
        case(f"provenance log: {name}", prov, _capture_files(real + extra), (0, 2), max_rss_mib=rss,
             max_seconds=cpu_s)
    for name, (data, codes) in hostile_traces().items():
        case(name, ["trace", "t.json"], {"t.json": data}, codes, max_rss_mib=400)
    good = _kineto(_steps(3))
    t = {"t.json": _kineto([_x(cat="kernel", name="k")])}
    case("trace of /dev/zero", ["trace", "/dev/zero"], {})
    case("trace of a 2.5 GiB sparse file", ["trace", "t.json"], {"t.json": ("sparse", b"", 5 * GiB // 2)})
    case("trace nested 100000 deep", ["trace", "t.json"], {"t.json": "[" * 100_000 + "]" * 100_000}, ANY)
    case("trace not JSON", ["trace", "t.json"], {"t.json": b"\xff\xfe garbage"})
    case("trace of a model", ["trace", "m.onnx"], {"m.onnx": mlp().SerializeToString()})
    case("trace --json onto its input", ["trace", "t.json", "--json", "t.json"], t)
    case("trace --json onto a device", ["trace", "t.json", "--json", "/dev/full"], t)
    case("trace --json output", ["trace", "t.json", "--json", "r.json"], t, (0,), ("r.json",))
    case("compare zero-length steps", ["trace", "b.json", "a.json"],
         {"b.json": _kineto(_steps(5, 0.0)), "a.json": good})
    case("compare negative steps", ["trace", "b.json", "a.json"],
         {"b.json": _kineto(_steps(5, -3.0)), "a.json": good})
    case("trace of /proc/self/mem", ["trace", "/proc/self/mem"], {})
    case("trace of /proc/self/status", ["trace", "/proc/self/status"], {})
    case("trace path of 5000 characters", ["trace", "x" * 5000 + ".json"], {})
    case("trace --json path of 5000 characters", ["trace", "t.json", "--json", "y" * 5000 + ".json"],
         {"t.json": good})
    case("trace --json -", ["trace", "t.json", "--json", "-"], {"t.json": good}, (0,))
    case("trace --json ''", ["trace", "t.json", "--json", ""], {"t.json": good})
    case("trace of a fifo", ["trace", "t.json"], {"t.json": "fifo"})
    before, after = segmentation_bomb()
    case("kernel names of 200 known ops each (segmentation)", ["trace", "b.json", "a.json"],
         {"b.json": before, "a.json": after}, (0,), max_rss_mib=600, max_seconds=COSTLY_S)
    deep = nested(20_000)
    compiled = _kineto([_x("cpp_fused_add_0", 0, 5)])
    case("20,000 nested ops compared", ["trace", "b.json", "a.json"], {"b.json": deep, "a.json": compiled},
         (0,), max_rss_mib=600, max_seconds=COSTLY_S)
    steps = _kineto(_steps(50_000))
    case("50,000 steps compared with themselves", ["trace", "s.json", "s.json"], {"s.json": steps}, (0,),
         max_rss_mib=700, max_seconds=COSTLY_S)
    return cases


def strict_problems(case: Case, result: dict) -> list[str]:
    """What check() lets through for fresh-interpreter cases but a trace refusal must not do: more lines."""
    if case.argv[:1] != ["trace"]:
        return []
    lines = [ln for ln in result["stderr"].splitlines() if ln.strip()]
    bound = getattr(case, "max_seconds", None)
    if bound is not None and result["cpu_s"] > bound:
        return [f"{result['cpu_s']} CPU s, over the {bound} s this small input may cost"]
    if result["code"] == 2 and len(lines) != 1:
        return [f"{len(lines)} stderr lines: {lines[:3]!r}"]
    if result["code"] == 0 and lines:
        return [f"stderr on success: {lines[:3]!r}"]
    return []
