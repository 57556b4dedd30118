"""Parse the readable code of an FX graph (as torch logs it) into nodes: name, op, inputs, source line.

    # File: /tmp/model.py:6 in f, code: y = torch.nn.functional.gelu(x @ w + b)
    mul: "f32[8, 64][64, 1]cpu" = torch.ops.aten.mul.Tensor(addmm_default, 0.5)
    matmul: "f32[8, 64][64, 1]cpu" = l_x_ @ l_w_;  l_w_ = None

Each node's op is the aten op it is or the one eager mode would run for it (`gelu` for torch._C._nn.gelu,
`matmul` for `@`), so it can be looked up in an eager trace as `aten::<op>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FILE = re.compile(r"^\s*# File: (?P<file>.+?):(?P<line>\d+) in (?P<func>[^,]+), code: (?P<code>.*)$")
_NODE = re.compile(r'^\s+(?P<name>[A-Za-z_]\w*)(?:\s*:\s*"[^"]*")?\s*=\s*(?P<rhs>.+?)\s*$')
_CALL = re.compile(r"^(?P<target>[A-Za-z_][\w.]*)\(")
_INFIX = re.compile(r"^(?:[A-Za-z_]\w*|\d[\d.e+-]*)\s*(?P<op>\*\*|//|[@+\-*/%<>&|^]|[<>=!]=)\s*\S")
_INFIX_OPS = {"@": "matmul", "+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow",
              "//": "floor_divide", "%": "remainder", "<": "lt", ">": "gt", "<=": "le", ">=": "ge",
              "==": "eq", "!=": "ne", "&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor"}
_FUNCTION_ROOTS = ("torch", "operator", "math", "builtins")
_OPS = re.compile(r"^torch\.ops\.(?P<ns>\w+)\.(?P<op>\w+)(?:\.\w+)?$")


@dataclass(frozen=True)
class FxNode:
    """One node of a logged FX graph."""

    name: str
    op: str  # aten-style op name: mul, gelu, matmul, getitem; "" when the line is a plain alias
    target: str  # what the code calls, as written (torch.ops.aten.mul.Tensor, torch._C._nn.gelu, @)
    file: str | None = None
    line: int | None = None
    func: str | None = None
    code: str | None = None
    inputs: tuple[str, ...] = ()  # the nodes and graph inputs it reads, in order


def op_of(rhs: str) -> tuple[str, str]:
    """(aten-style op, target as written) of a node's right-hand side."""
    m = _CALL.match(rhs)
    if m:
        target = m.group("target")
        ops = _OPS.match(target)
        if ops:
            return (ops.group("op") if ops.group("ns") == "aten" else f"{ops.group('ns')}::{ops.group('op')}",
                    target)
        parts = target.split(".")
        op = parts[-1].lstrip("_") if parts[0] in _FUNCTION_ROOTS else parts[-1]
        return op, target
    m = _INFIX.match(rhs)
    if m:
        return _INFIX_OPS[m.group("op")], m.group("op")
    if re.match(r"^[A-Za-z_]\w*\[", rhs):
        return "getitem", "[]"
    if re.match(r"^-[A-Za-z_]", rhs):
        return "neg", "-"
    return "", rhs.split(";")[0].strip()


_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_ARG = re.compile(r"(?:\(self,\s*|,\s*)([A-Za-z_]\w*)\s*[:,)]")


def graph_inputs(code: str) -> list[str]:
    """The argument names of the graph's forward (its inputs), in order."""
    for line in code.splitlines():
        if line.strip().startswith("def forward("):
            return [a for a in _ARG.findall(line) if a != "self"]
    return []


def graph_outputs(code: str) -> list[str]:
    """The names the forward returns."""
    for line in code.splitlines():
        s = line.strip()
        if s.startswith("return "):
            return _NAME.findall(s[len("return "):])
    return []


def parse_graph(code: str) -> dict[str, FxNode]:
    """The nodes of an FX graph's readable code, keyed by name, each with the source comment above it."""
    nodes: dict[str, FxNode] = {}
    known = set(graph_inputs(code))
    src = None
    in_forward = False
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("def forward("):
            in_forward = True
            continue
        if not in_forward:
            continue
        if not stripped:
            src = None  # a blank line ends the group a `# File:` comment heads
            continue
        m = _FILE.match(line)
        if m:
            src = m
            continue
        if stripped.startswith(("return ", "#", "def ", "class ")):
            continue
        m = _NODE.match(line)
        if not m:
            continue
        rhs = m.group("rhs").split(";  ")[0]
        op, target = op_of(rhs)
        name = m.group("name")
        if not op:
            known.add(name)  # an alias (l_x_ = L_x_) runs nothing, but later nodes read it
            continue
        args = rhs[len(target):] if rhs.startswith(target) else rhs
        inputs = tuple(dict.fromkeys(a for a in _NAME.findall(args) if a in known and a != name))
        nodes[name] = FxNode(
            name, op, target,
            src.group("file") if src else None, int(src.group("line")) if src else None,
            src.group("func").strip() if src else None, src.group("code").strip() if src else None,
            inputs)
        known.add(name)
    return nodes
