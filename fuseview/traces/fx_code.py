"""Parse the readable code of an FX graph (as torch logs it) into nodes: name, op, inputs, source line.

    # File: /tmp/model.py:6 in f, code: y = torch.nn.functional.gelu(x @ w + b)
    mul: "f32[8, 64][64, 1]cpu" = torch.ops.aten.mul.Tensor(addmm_default, 0.5)
    matmul: "f32[8, 64][64, 1]cpu" = l_x_ @ l_w_;  l_w_ = None

Each node's op is the aten op it is or the one eager mode would run for it (`gelu` for torch._C._nn.gelu,
`matmul` for `@`), so it can be looked up in an eager trace as `aten::<op>`.

Linear in its input: lines are parsed by splitting, and the few patterns left are anchored with no
nested or adjacent unbounded repeats (no backtracking on a hostile line). GraphParser reads one line at a
time, so a logged payload is never held whole; it keeps at most MAX_NODES nodes and clips the strings
it keeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_NODES = 20_000  # nodes kept per graph (a larger graph is cut; `dropped` counts the rest)
MAX_TEXT = 400  # characters kept of a node's source code, file or function
_IDENT = re.compile(r"[A-Za-z_]\w*")
_NAMES = re.compile(r"[A-Za-z_]\w*|\d\w*")  # identifiers, and number-like tokens skipped as a whole
_TARGET = re.compile(r"[A-Za-z_][\w.]*")
_NUMBER = re.compile(r"\d[\d.e+-]*")
_INFIX_OPS = {"@": "matmul", "+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow",
              "//": "floor_divide", "%": "remainder", "<": "lt", ">": "gt", "<=": "le", ">=": "ge",
              "==": "eq", "!=": "ne", "&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor"}
_BY_LENGTH = sorted(_INFIX_OPS, key=len, reverse=True)  # `**` before `*`
_FUNCTION_ROOTS = ("torch", "operator", "math", "builtins")


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


@dataclass(frozen=True)
class SourceComment:
    """A `# File: path:line in func, code: ...` comment."""

    file: str
    line: int
    func: str
    code: str


def _clip(s: str) -> str:
    return s if len(s) <= MAX_TEXT else s[: MAX_TEXT - 1] + "…"


def source_comment(line: str) -> SourceComment | None:
    """The parts of a `# File:` comment line, else None."""
    s = line.strip()
    if not s.startswith("# File: "):
        return None
    head, sep, code = s[len("# File: "):].partition(", code: ")
    where, sep2, func = head.rpartition(" in ")
    file, sep3, num = where.rpartition(":")
    if not (sep and sep2 and sep3 and file and func) or "," in func or not num.isdigit() or len(num) > 9:
        return None
    return SourceComment(_clip(file), int(num), _clip(func.strip()), _clip(code.strip()))


def _ops_target(target: str) -> str | None:
    parts = target.split(".")
    if len(parts) in (4, 5) and parts[:2] == ["torch", "ops"] and all(p.isidentifier() for p in parts[2:]):
        ns, op = parts[2], parts[3]
        return op if ns == "aten" else f"{ns}::{op}"
    return None


def _infix(rhs: str) -> str | None:
    m = _IDENT.match(rhs) or _NUMBER.match(rhs)
    if m is None:
        return None
    rest = rhs[m.end():].lstrip()
    for sym in _BY_LENGTH:
        if rest.startswith(sym):
            return sym if rest[len(sym):].strip() else None
    return None


def op_of(rhs: str) -> tuple[str, str]:
    """(aten-style op, target as written) of a node's right-hand side."""
    m = _TARGET.match(rhs)
    if m and rhs[m.end():m.end() + 1] == "(":
        target = m.group(0)
        op = _ops_target(target)
        if op is not None:
            return op, target
        parts = target.split(".")
        return (parts[-1].lstrip("_") if parts[0] in _FUNCTION_ROOTS else parts[-1]), target
    sym = _infix(rhs)
    if sym is not None:
        return _INFIX_OPS[sym], sym
    m = _IDENT.match(rhs)
    if m and rhs[m.end():m.end() + 1] == "[":
        return "getitem", "[]"
    if rhs.startswith("-") and _IDENT.match(rhs, 1):
        return "neg", "-"
    return "", rhs.split(";")[0].strip()


def _unquoted(s: str) -> str:
    return "".join(s.split('"')[::2])  # the text outside "..." (type annotations hold commas)


def forward_args(line: str) -> list[str]:
    """The argument names of a `def forward(self, a: "f32[2]", b)` line (without self)."""
    inner = _unquoted(line.strip()[len("def forward("):]).rsplit(")", 1)[0]
    out = []
    for piece in inner.split(","):
        name = piece.split(":", 1)[0].split("=", 1)[0].strip()
        if name.isidentifier() and name != "self":
            out.append(name)
    return out


def names_in(text: str) -> list[str]:
    """The identifiers in text, in order (number tokens like 1e5 or 0x1f are skipped whole)."""
    return [t for t in _NAMES.findall(text) if not t[0].isdigit()]


def _node_line(line: str) -> tuple[str, str] | None:
    """(name, right-hand side) of an indented `name: "type" = rhs` line, else None."""
    if not line[:1].isspace():
        return None
    s = line.strip()
    m = _IDENT.match(s)
    if m is None:
        return None
    rest = s[m.end():].lstrip()
    if rest.startswith(":"):
        rest = rest[1:].lstrip()
        if not rest.startswith('"'):
            return None
        close = rest.find('"', 1)
        if close < 0:
            return None
        rest = rest[close + 1:].lstrip()
    if not rest.startswith("=") or rest.startswith("=="):
        return None
    rhs = rest[1:].strip()
    return (m.group(0), rhs) if rhs else None


@dataclass
class GraphParser:
    """Reads an FX graph's code one line at a time (feed), keeping its nodes, inputs and outputs."""

    nodes: dict[str, FxNode] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    dropped: int = 0  # nodes past MAX_NODES, not kept
    _known: set[str] = field(default_factory=set)
    _src: SourceComment | None = None
    _in_forward: bool = False
    _seen_return: bool = False

    def feed(self, line: str) -> None:
        """One line of the graph's code."""
        stripped = line.strip()
        if not self._seen_return and stripped.startswith("return "):
            self._seen_return = True
            self.outputs = names_in(stripped[len("return "):])
        if stripped.startswith("def forward("):
            if not self._in_forward:
                self._in_forward = True
                self.inputs = forward_args(stripped)
                self._known.update(self.inputs)
            return
        if not self._in_forward:
            return
        if not stripped:
            self._src = None  # a blank line ends the group a `# File:` comment heads
            return
        if stripped.startswith("#"):
            src = source_comment(stripped)
            if src is not None:
                self._src = src
            return
        if stripped.startswith(("return ", "def ", "class ")):
            return
        parsed = _node_line(line)
        if parsed is None:
            return
        name, rhs = parsed
        rhs = rhs.split(";  ")[0]
        op, target = op_of(rhs)
        if not op:
            self._known.add(name)  # an alias (l_x_ = L_x_) runs nothing, but later nodes read it
            return
        if len(self.nodes) >= MAX_NODES and name not in self.nodes:
            self.dropped += 1
            return
        args = rhs[len(target):] if rhs.startswith(target) else rhs
        inputs = tuple(dict.fromkeys(a for a in names_in(args) if a in self._known and a != name))
        src = self._src
        self.nodes[name] = FxNode(name, op, _clip(target), src.file if src else None,
                                  src.line if src else None, src.func if src else None,
                                  src.code if src else None, inputs)
        self._known.add(name)


def parse_code(code: str) -> GraphParser:
    """A whole graph's code parsed (nodes, inputs, outputs)."""
    p = GraphParser()
    for line in code.splitlines():
        p.feed(line)
    return p


